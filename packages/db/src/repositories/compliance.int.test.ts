import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { generateConversation, createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { normalizeLines, type ComplianceAction, type ComplianceEvent } from '@threadline/domain'
import { storeBatch } from './store-batch.js'
import { applyComplianceEvents, complianceLogPage, withdrawnAmong } from './compliance.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const received = '2026-11-28T12:00:00.000Z'
const later = '2026-11-28T12:30:00.000Z'
const event = (
  e: Partial<ComplianceEvent> & Pick<ComplianceEvent, 'id' | 'action'>,
): ComplianceEvent => ({
  kind: 'tweet',
  eventAt: '2026-11-28T10:00:00.000Z',
  receivedAt: received,
  source: 'stream',
  ...e,
})

async function postRow(id: string) {
  const { rows } = await sql<{
    text: string
    raw: Record<string, unknown>
    author_id: string | null
    conversation_id: string | null
    in_reply_to_post_id: string | null
    search_terms: string[]
    withdrawn: string | null
    withdrawn_reason: string | null
  }>`SELECT text, raw, author_id::text, conversation_id::text, in_reply_to_post_id::text,
      search_terms, withdrawn, withdrawn_reason
    FROM posts WHERE id = ${id}`.execute(env.db)
  return rows[0]
}

/** The rows that still name Post `id`: references and mentions. */
async function referencesOf(id: string) {
  const { rows } = await sql`SELECT 1 FROM post_references WHERE post_id = ${id}
    UNION ALL SELECT 1 FROM post_mentions WHERE post_id = ${id}`.execute(env.db)
  return rows
}

/**
 * A conversation of `size` Posts on day `day` of November 2026, by one author whose id is moved by
 * `offset`: withdrawing that author touches no other test's Posts.
 */
function byOwnAuthor(size: number, seed: number, day: number, offset: bigint) {
  const c = generateConversation({ size, seed, users: 1, startMs: Date.UTC(2026, 10, day) })
  const author = (JSON.parse(c.lines[0]!) as { data: { author_id: string } }).data.author_id
  const userId = String(BigInt(author) + offset)
  const lines = c.lines.map((l) => l.replaceAll(`"${author}"`, `"${userId}"`))
  return { ids: c.ids, userId, lines }
}

/** A user's stored name and withdrawal. */
async function userRow(id: string) {
  const { rows } = await sql<{ name: string; withdrawn: string | null }>`
    SELECT name, withdrawn FROM users WHERE id = ${id}`.execute(env.db)
  return rows[0]
}

/** Applies one event on user `id` at `eventAt`. */
const applyUserEvent = (id: string, action: ComplianceAction, eventAt: string) =>
  applyComplianceEvents(env.db, [event({ kind: 'user', id, action, eventAt })])

async function version(conversationId: string): Promise<string> {
  const { rows } = await sql<{ version: string }>`
    SELECT version::text FROM conversations WHERE id = ${conversationId}`.execute(env.db)
  return rows[0]!.version
}

describe('applyComplianceEvents', () => {
  const conv = generateConversation({ size: 12, seed: 45, padding: true })
  const mid = conv.ids[5]!

  beforeAll(async () => {
    await storeBatch(env.db, normalizeLines(conv.lines, received), 'test')
  })

  it('a delete erases the Post in place, logs once, and a repeat changes nothing', async () => {
    const before = await postRow(mid)
    expect(before!.text).toMatch(/^post 5 /)
    const v0 = await version(conv.rootId)
    const del = event({ id: mid, action: 'delete' })
    expect(await applyComplianceEvents(env.db, [del, del])).toMatchObject({
      applied: 1,
      repeated: 1,
      erased: [{ id: mid, conversationId: conv.rootId }],
      conversations: [conv.rootId],
    })
    const after = await postRow(mid)
    expect(after).toMatchObject({
      text: '',
      author_id: null,
      conversation_id: conv.rootId,
      in_reply_to_post_id: before!.in_reply_to_post_id,
      search_terms: [],
      withdrawn: 'deleted',
      withdrawn_reason: 'deleted',
    })
    expect(Object.keys(after!.raw).sort()).toEqual(
      ['conversation_id', 'created_at', 'id', 'referenced_tweets'].sort(),
    )
    expect(BigInt(await version(conv.rootId))).toBeGreaterThan(BigInt(v0))
    expect(await referencesOf(mid)).toEqual([])

    const v1 = await version(conv.rootId)
    expect(await applyComplianceEvents(env.db, [del])).toEqual({
      applied: 0,
      repeated: 1,
      erased: [],
      conversations: [],
    })
    expect(await version(conv.rootId)).toBe(v1)
    // The log took the author from the stored Post before erasing it.
    const [logged] = await complianceLogPage(env.db, { kind: 'tweet', limit: 10 })
    expect(logged).toMatchObject({
      id: mid,
      action: 'delete',
      eventAt: del.eventAt,
      source: 'stream',
    })
    expect(logged!.authorId).toMatch(/^\d+$/)
  })

  it('drop hides, an older undrop arriving later changes nothing, a newer one shows it again', async () => {
    const id = conv.ids[7]!
    await applyComplianceEvents(env.db, [
      event({ id, action: 'drop', eventAt: '2026-11-28T10:05:00.000Z' }),
    ])
    expect(await postRow(id)).toMatchObject({ withdrawn: 'hidden', withdrawn_reason: 'dropped' })
    expect((await postRow(id))!.text).toMatch(/^post 7 /)
    await applyComplianceEvents(env.db, [
      event({ id, action: 'undrop', eventAt: '2026-11-28T10:04:00.000Z' }),
    ])
    expect(await postRow(id)).toMatchObject({ withdrawn: 'hidden' })
    await applyComplianceEvents(env.db, [
      event({ id, action: 'undrop', eventAt: '2026-11-28T10:06:00.000Z' }),
    ])
    expect(await postRow(id)).toMatchObject({ withdrawn: null, withdrawn_reason: null })
  })

  it('a user event hides and shows its Posts; a deleted Post stays deleted', async () => {
    const author = (await postRow(conv.ids[8]!))!.author_id!
    const { rows } = await sql<{ id: string }>`SELECT id::text FROM posts
      WHERE author_id = ${author} ORDER BY id`.execute(env.db)
    const at = (m: number) => `2026-11-28T11:${String(m).padStart(2, '0')}:00.000Z`
    await applyComplianceEvents(env.db, [
      event({ kind: 'user', id: author, action: 'user_protect', eventAt: at(1) }),
    ])
    for (const { id } of rows) {
      expect(await postRow(id)).toMatchObject({
        withdrawn: 'hidden',
        withdrawn_reason: 'protected',
      })
    }
    expect(await withdrawnAmong(env.db, 'user', [author, '1'])).toEqual([
      { id: author, action: 'delete', reason: 'protected', eventAt: at(1) },
    ])
    await applyComplianceEvents(env.db, [
      event({ id: rows[0]!.id, action: 'delete', eventAt: at(2) }),
      event({ kind: 'user', id: author, action: 'user_unprotect', eventAt: at(3) }),
    ])
    expect(await postRow(rows[0]!.id)).toMatchObject({ withdrawn: 'deleted', text: '' })
    for (const { id } of rows.slice(1)) expect(await postRow(id)).toMatchObject({ withdrawn: null })
  })

  it('an event for a Post not stored yet leaves a withdrawn placeholder', async () => {
    const id = '1994000000000000001'
    await applyComplianceEvents(env.db, [event({ id, action: 'delete' })])
    expect(await postRow(id)).toMatchObject({ withdrawn: 'deleted', text: '' })
    expect(await withdrawnAmong(env.db, 'tweet', [id, mid, 'x'])).toEqual(
      expect.arrayContaining([
        { id, action: 'delete', reason: 'deleted', eventAt: '2026-11-28T10:00:00.000Z' },
        expect.objectContaining({ id: mid, reason: 'deleted' }),
      ]),
    )
  })

  it('an id with no partition is only logged', async () => {
    const farAhead = '9100000000000000000'
    expect(
      await applyComplianceEvents(env.db, [event({ id: farAhead, action: 'drop' })]),
    ).toMatchObject({
      applied: 1,
      repeated: 0,
    })
    expect(await postRow(farAhead)).toBeUndefined()
  })

  it('withheld sets the countries; scrub_geo erases geo up to the id', async () => {
    const id = conv.ids[9]!
    await sql`UPDATE posts SET raw = raw || '{"geo":{"place_id":"abc"}}' WHERE id = ${id}`.execute(
      env.db,
    )
    const author = (await postRow(id))!.author_id!
    await applyComplianceEvents(env.db, [
      event({ id, action: 'withheld', withheldInCountries: ['DE', 'FR'] }),
      event({ kind: 'user', id: author, action: 'scrub_geo', upToTweetId: id }),
    ])
    const { rows } = await sql<{ c: string[]; geo: unknown }>`
      SELECT withheld_in_countries AS c, raw->'geo' AS geo FROM posts WHERE id = ${id}`.execute(
      env.db,
    )
    expect(rows[0]).toEqual({ c: ['DE', 'FR'], geo: null })
  })

  it('complianceLogPage pages by seq and filters by time', async () => {
    const all = await complianceLogPage(env.db, { kind: 'tweet', limit: 100 })
    expect(all.length).toBeGreaterThan(3)
    const page = await complianceLogPage(env.db, { kind: 'tweet', afterSeq: all[1]!.seq, limit: 2 })
    expect(page.map((e) => e.seq)).toEqual([all[2]!.seq, all[3]!.seq])
    const late = await complianceLogPage(env.db, {
      kind: 'tweet',
      startTime: '2026-11-28T10:05:00.000Z',
      endTime: '2026-11-28T10:06:00.000Z',
      limit: 100,
    })
    expect(late.map((e) => e.action)).toEqual(['drop'])
    const withheld = all.find((e) => e.action === 'withheld')
    expect(withheld!.withheldInCountries).toEqual(['DE', 'FR'])
  })
})

describe('the writer honours withdrawals (events win over content)', () => {
  const conv = generateConversation({
    size: 6,
    seed: 4501,
    padding: true,
    startMs: Date.UTC(2026, 10, 2),
  })

  it('a Post deleted before it is stored stays an erased placeholder when its content comes', async () => {
    const id = conv.ids[3]!
    await applyComplianceEvents(env.db, [event({ id, action: 'delete' })])
    const stored = await storeBatch(env.db, normalizeLines(conv.lines, later), 'test')
    expect(await postRow(id)).toMatchObject({
      withdrawn: 'deleted',
      text: '',
      author_id: null,
      search_terms: [],
    })
    expect(stored.outbox[0]!.payload.post_ids).not.toContain(id)
    expect(stored.outbox[0]!.payload.post_ids).toContain(conv.ids[2])
    // A newer copy again: still nothing comes back, no reference, no mention.
    await storeBatch(env.db, normalizeLines([conv.lines[3]!], '2026-11-28T13:00:00.000Z'), 'test')
    expect(await postRow(id)).toMatchObject({ withdrawn: 'deleted', text: '' })
    expect(await referencesOf(id)).toEqual([])
  })

  it('a Post dropped before it is stored is stored hidden, counted, not published', async () => {
    const c = generateConversation({ size: 4, seed: 4502, startMs: Date.UTC(2026, 10, 3) })
    const id = c.ids[2]!
    await applyComplianceEvents(env.db, [event({ id, action: 'drop' })])
    const stored = await storeBatch(env.db, normalizeLines(c.lines, later), 'test')
    expect(stored.inserted).toBe(4)
    expect(stored.outbox[0]!.payload.post_ids).not.toContain(id)
    expect(await postRow(id)).toMatchObject({ withdrawn: 'hidden', withdrawn_reason: 'dropped' })
    expect((await postRow(id))!.text).toMatch(/^post 2 /)
    const { rows } = await sql<{ n: number }>`SELECT post_count AS n FROM conversations
      WHERE id = ${c.rootId}`.execute(env.db)
    expect(rows[0]!.n).toBe(4)
  })

  it("a new Post of a withdrawn author is stored hidden with the author's reason", async () => {
    const { ids, userId, lines } = byOwnAuthor(3, 4503, 4, 5000n)
    await applyUserEvent(userId, 'user_suspend', later)
    const stored = await storeBatch(env.db, normalizeLines(lines, later), 'test')
    expect(stored.outbox).toEqual([])
    for (const id of ids) {
      expect(await postRow(id)).toMatchObject({
        withdrawn: 'hidden',
        withdrawn_reason: 'suspended',
      })
    }
    expect(await userRow(userId)).toEqual({ name: 'User 0', withdrawn: 'hidden' })
    await applyUserEvent(userId, 'user_unsuspend', '2026-11-28T12:31:00.000Z')
    for (const id of ids) expect(await postRow(id)).toMatchObject({ withdrawn: null })
  })
})

describe('a user deleted, then its Posts', () => {
  it('keeps the user hidden until the Post deletes come, then erases its profile for good', async () => {
    const { ids, userId, lines } = byOwnAuthor(2, 4504, 5, 7000n)
    await storeBatch(env.db, normalizeLines(lines, received), 'test')
    const profile = () => userRow(userId)
    await applyUserEvent(userId, 'user_delete', '2026-11-28T14:00:00.000Z')
    expect(await profile()).toEqual({ name: 'User 0', withdrawn: 'hidden' })
    await applyComplianceEvents(
      env.db,
      ids.map((id) => event({ id, action: 'delete', eventAt: '2026-11-28T14:01:00.000Z' })),
    )
    expect(await profile()).toEqual({ name: '', withdrawn: 'deleted' })
    // Neither a new copy of the user nor an undelete brings the profile back.
    await storeBatch(env.db, normalizeLines(lines, '2026-11-28T15:00:00.000Z'), 'test')
    await applyUserEvent(userId, 'user_undelete', '2026-11-28T14:02:00.000Z')
    expect(await profile()).toEqual({ name: '', withdrawn: 'deleted' })
  })
})

describe('an author withdrawn while the writer stores', () => {
  it('a new Post of the author is hidden even though the statement began before', async () => {
    const { ids, userId, lines } = byOwnAuthor(2, 4505, 6, 9000n)
    await storeBatch(env.db, normalizeLines([lines[0]!], received), 'test')
    // A compliance transaction that has withdrawn the author (and hidden its stored Posts), not
    // committed yet.
    const { default: pg } = await import('pg')
    const other = new pg.Client({ connectionString: env.databaseUrl })
    await other.connect()
    try {
      await other.query('BEGIN')
      await other.query(
        `UPDATE users SET withdrawn = 'hidden', withdrawn_reason = 'protected',
           withdrawn_at = now() WHERE id = $1`,
        [userId],
      )
      await other.query(
        `UPDATE posts SET withdrawn = 'hidden', withdrawn_reason = 'protected'
         WHERE author_id = $1`,
        [userId],
      )
      // The writer's statement starts now (its snapshot without the withdrawal) and, carrying the
      // author renamed, waits on the author's row until the compliance transaction commits.
      const renamed = lines[1]!.replaceAll('"User 0"', '"User 0 renamed"')
      const storing = storeBatch(env.db, normalizeLines([renamed], later), 'test')
      await waitFor('the writer waiting on the author', async () => {
        const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(env.db)
        return Number(rows[0]!.n) > 0
      })
      await other.query('COMMIT')
      const stored = await storing
      expect(stored.inserted).toBe(1)
      expect(await postRow(ids[1]!)).toMatchObject({
        withdrawn: 'hidden',
        withdrawn_reason: 'protected',
      })
    } finally {
      await other.end()
    }
  })
})

describe('scrub_geo before a copy arrives', () => {
  it("stores the author's Posts up to the id without geo, later ones with it", async () => {
    const { ids, userId, lines: plain } = byOwnAuthor(3, 4506, 7, 11000n)
    const lines = plain.map((l) => {
      const parsed = JSON.parse(l) as { data: Record<string, unknown> }
      parsed.data.geo = { place_id: 'abc123' }
      return JSON.stringify(parsed)
    })
    await applyComplianceEvents(env.db, [
      event({ kind: 'user', id: userId, action: 'scrub_geo', upToTweetId: ids[1]! }),
    ])
    await storeBatch(env.db, normalizeLines(lines, received), 'test')
    const geo = async (id: string) => (await postRow(id))!.raw.geo
    expect(await geo(ids[0]!)).toBeUndefined()
    expect(await geo(ids[1]!)).toBeUndefined()
    expect(await geo(ids[2]!)).toEqual({ place_id: 'abc123' })
  })
})
