import { writeFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { importFiles } from '@threadline/cli'
import { sql } from '@threadline/db'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'

let env: TestEnv
let dir: string
beforeAll(async () => {
  env = await createTestEnv()
  dir = await mkdtemp(join(tmpdir(), 'threadline-import-'))
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
  await env?.close()
})

/** twarc2 writes one search response page per line, with an extra `__twarc` key. */
function twarcPages(lines: string[], perPage: number): string[] {
  const items = lines.map((l) => JSON.parse(l) as { data: unknown; includes: { users: unknown[] } })
  const pages: string[] = []
  for (let i = 0; i < items.length; i += perPage) {
    const slice = items.slice(i, i + perPage)
    pages.push(
      JSON.stringify({
        data: slice.map((s) => s.data).reverse(), // search pages are newest first
        includes: { users: slice.flatMap((s) => s.includes.users) },
        meta: { result_count: slice.length, newest_id: 'x', oldest_id: 'y' },
        __twarc: {
          url: 'https://api.twitter.com/2/tweets/search/all?query=conversation_id%3A1',
          version: '2.14.0',
          retrieved_at: '2026-11-20T10:00:00+00:00',
        },
      }),
    )
  }
  return pages
}

describe('threadline import', () => {
  it('stores every conversation of a twarc2 file (pages and flattened Posts) through the queue', async () => {
    const a = generateConversation({ size: 700, seed: 21, startMs: Date.UTC(2026, 8, 1) })
    const b = generateConversation({ size: 300, seed: 22, startMs: Date.UTC(2026, 8, 2) })
    // Conversation a as search pages of 100; conversation b as twarc2's flattened Posts (author inlined).
    const flattened = b.lines.map((l) => {
      const { data, includes } = JSON.parse(l) as {
        data: { author_id: string }
        includes: { users: Array<{ id: string }> }
      }
      return JSON.stringify({
        ...data,
        author: includes.users.find((u) => u.id === data.author_id),
        __twarc: { version: '2.14.0' },
      })
    })
    const file = join(dir, 'conversations.jsonl')
    await writeFile(
      file,
      [...twarcPages(a.lines, 100), ...flattened, '', 'this line is broken'].join('\n'),
    )

    const summary = await importFiles(env.config, env.logger, [file], { wait: true })
    expect(summary).toMatchObject({ files: 1, lines: 7 + 300 + 1, inserted: 1000, rejected: 1 })

    const conversations = await sql<{
      id: string
      root_post_id: string | null
      post_count: number
      reply_count: number
    }>`
      SELECT id::text, root_post_id::text, post_count, reply_count FROM conversations ORDER BY id`.execute(
      env.db,
    )
    expect(conversations.rows).toEqual([
      { id: a.rootId, root_post_id: a.rootId, post_count: 700, reply_count: 699 },
      { id: b.rootId, root_post_id: b.rootId, post_count: 300, reply_count: 299 },
    ])
    const authors = await sql<{
      n: string
    }>`SELECT count(*) AS n FROM posts p JOIN users u ON u.id = p.author_id`.execute(env.db)
    expect(authors.rows[0]!.n).toBe('1000')
    const rejects = await env.db.selectFrom('ingest_rejects').select(['source', 'raw']).execute()
    expect(rejects).toEqual([{ source: 'import:conversations.jsonl', raw: 'this line is broken' }])

    // Importing the same file again stores nothing new and changes no counter.
    const again = await importFiles(env.config, env.logger, [file], { wait: true })
    expect(again.inserted).toBe(0)
    const after =
      await sql`SELECT id::text, root_post_id::text, post_count, reply_count FROM conversations ORDER BY id`.execute(
        env.db,
      )
    expect(after.rows).toEqual(conversations.rows)
  })

  it('fails within seconds, saying where Redis was looked for, when Redis does not answer', async () => {
    const file = join(dir, 'one.jsonl')
    await writeFile(file, `${generateConversation({ size: 1, seed: 5 }).lines[0]}\n`)
    // Nothing listens on port 1. Without the check the import waited on its queue forever.
    const config = {
      ...env.config,
      REDIS_URL: 'redis://127.0.0.1:1',
      REDIS_CLUSTER_NODES: undefined,
    }
    await expect(importFiles(config, env.logger, [file], { wait: true })).rejects.toThrow(
      'cannot reach Redis at 127.0.0.1:1 (REDIS_URL): connect ECONNREFUSED 127.0.0.1:1',
    )
  })
})
