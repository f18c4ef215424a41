import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createPartition,
  expirePartitions,
  listPartitions,
  sql,
  type PartitionedTable,
} from '@threadline/db'
import { snowflakeAt } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { storeLines } from '@threadline/writer'
import type { ApiServer } from '@threadline/api'
import { startTestServer } from '@threadline/testing/api'
import { streamLine, type GenPost } from './fixture.js'

/**
 * POSTS_RETENTION_DAYS expires whole partitions (docs/operations.md, "Retention"): a long
 * conversation whose root's day expires keeps its younger replies, and the tree shows those whose
 * parent went as orphans (docs/api.md §5.1).
 */
let env: TestEnv
let server: ApiServer
let token: string
beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
})
afterAll(() => env?.close())

const DAY = 86_400_000
const midnight = (offset: number) => new Date(Math.floor(Date.now() / DAY) * DAY + offset * DAY)

/** The coarse partition before yesterday, split at `cut` so that the older part can expire. */
async function splitAt(table: PartitionedTable, cut: Date) {
  const coarse = (await listPartitions(env.db, table)).find(
    (p) => p.to === snowflakeAt(midnight(-1)),
  )!
  await sql`DROP TABLE ${sql.table(coarse.name)}`.execute(env.db)
  await createPartition(env.db, table, { ...coarse, to: snowflakeAt(cut) })
  await createPartition(env.db, table, {
    name: `${table}_cut`,
    from: snowflakeAt(cut),
    to: coarse.to,
  })
}

function post(daysAgo: number, parent: GenPost | null, rootId?: string): GenPost {
  const ms = Date.now() - daysAgo * DAY
  const id = snowflakeAt(new Date(ms))
  return {
    id,
    conversationId: rootId ?? id,
    parent: parent?.id ?? null,
    author: '7',
    ms,
    likes: 0,
    replyCount: 0,
  }
}

describe('retention of a long conversation', () => {
  it('keeps the replies younger than the retention; those whose parent expired are orphans', async () => {
    for (const table of ['posts', 'post_references', 'conversations'] as const) {
      await splitAt(table, midnight(-30))
    }
    const root = post(40, null)
    const early = post(39, root, root.id)
    const middle = post(10, early, root.id)
    const late = post(2, middle, root.id)
    const direct = post(5, root, root.id)
    const all = [root, early, middle, late, direct]
    await storeLines(env.db, all.map(streamLine), new Date().toISOString(), 'test')

    const dropped = await expirePartitions(env.db, new Date(), 30)
    expect(dropped).toContain('conversations_legacy')
    const { rows } = await sql<{ id: string }>`SELECT id FROM posts ORDER BY id`.execute(env.db)
    expect(rows.map((r) => r.id)).toEqual([middle.id, direct.id, late.id])

    const res = await server.app.inject({
      method: 'GET',
      url: `/2/conversations/${root.id}`,
      headers: { authorization: `Bearer ${token}` },
    })
    expect(res.statusCode).toBe(200)
    const body = res.json<{
      data: Array<{
        id: string
        thread: { depth: number; parent_id?: string; missing_parent?: true }
      }>
      errors: Array<{ parameter: string; resource_id: string }>
      meta: Record<string, unknown>
    }>()
    expect(body.data.map((p) => [p.id, p.thread.depth, p.thread.missing_parent])).toEqual([
      [middle.id, 1, true],
      [late.id, 2, undefined],
      [direct.id, 1, true],
    ])
    expect(body.errors.map((e) => [e.parameter, e.resource_id])).toEqual(
      expect.arrayContaining([
        ['conversation_id', root.id],
        ['parent_id', early.id],
      ]),
    )
    expect(body.meta).toMatchObject({ post_count: 3, missing_count: 2, max_depth: 2 })
  })
})
