import { execFile, spawnSync } from 'node:child_process'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { importFiles } from '@threadline/cli'
import { createApp, readConversationTree, sql, type Db } from '@threadline/db'
import { addPostsBatch, createQueue, type PostsJob } from '@threadline/queue'
import { createTestEnv, prng, shuffle, waitFor, type TestEnv } from '@threadline/testing'
import { startApi } from '../support/api.js'
import { startTestWriter } from '../support/writer.js'
import { conversationFixture, expectedTree, streamLine, type GenPost } from './fixture.js'

/**
 * GET /2/conversations/:id/export and `threadline export` (docs/api.md §5) over a conversation
 * stored by the real writer from the posts queue: every format read back by an independent reader
 * (python's csv and networkx, `threadline import` into an empty store) and compared with the tree
 * built in fixture.ts.
 */
const run = promisify(execFile)
let env: TestEnv
let api: ApiServer
let token: string
let dir: string
const fx = conversationFixture(36)
const TWEPOCH = 1288834974657n

/** Texts a CSV or XML writer gets wrong when it is careless. */
const AWKWARD = [
  'comma, "quotes" and a\r\nCRLF',
  'markup <b>&amp;</b> & ]]> "attr"',
  'emoji 🧵 and a bell \u0007 and a tab\t.',
  'bare\nnewline and a trailing space ',
  '=SUM(A1) starts like a formula',
]

/**
 * The fixture's conversation, plus a wide fan under the root so the export crosses its pages,
 * with awkward texts here and there.
 */
function conversation(): { posts: GenPost[]; texts: Map<string, string> } {
  const random = prng(7)
  const posts = fx.posts.filter((p) => p.id !== fx.missingId)
  const last = Math.max(...posts.map((p) => p.ms))
  for (let i = 0; i < 900; i++) {
    const ms = last + 1_000 + i * 7
    const id = (((BigInt(ms) - TWEPOCH) << 22n) | BigInt(i % 4096)).toString()
    const parent = i % 3 === 0 ? fx.rootId : posts[Math.floor(random() * posts.length)]!.id
    posts.push({
      id,
      conversationId: fx.rootId,
      parent,
      author: String(5000 + (i % 40)),
      ms,
      likes: i % 5,
      replyCount: 0,
    })
  }
  const texts = new Map<string, string>()
  posts.forEach((p, i) => {
    if (i % 97 === 5) texts.set(p.id, AWKWARD[texts.size % AWKWARD.length]!)
  })
  return { posts, texts }
}

const { posts, texts } = conversation()
const stored = [...posts, fx.outsideQuote]
const textOf = (p: GenPost) =>
  texts.get(p.id) ?? `post ${p.id}${p.parent ? ` replying to ${p.parent}` : ''}`

function line(p: GenPost): string {
  const parsed = JSON.parse(streamLine(p)) as { data: { text: string } }
  parsed.data.text = textOf(p)
  return JSON.stringify(parsed)
}

const python = ['/usr/bin/python3', 'python3'].find(
  (bin) => spawnSync(bin, ['-c', 'import networkx'], { stdio: 'ignore' }).status === 0,
)

async function python3(script: string, file: string): Promise<unknown> {
  if (!python) throw new Error('no python3 with networkx on this machine')
  const { stdout } = await run(python, ['-c', script, file], { maxBuffer: 64 * 1024 * 1024 })
  return JSON.parse(stdout)
}

async function exportOver(
  format: string,
  id = fx.rootId,
): Promise<{ status: number; type: string | null; body: Buffer; disposition: string | null }> {
  const res = await fetch(`${api.url()}/2/conversations/${id}/export?format=${format}`, {
    headers: { authorization: `Bearer ${token}` },
  })
  return {
    status: res.status,
    type: res.headers.get('content-type'),
    disposition: res.headers.get('content-disposition'),
    body: Buffer.from(await res.arrayBuffer()),
  }
}

async function storedCount(db: Db, conversationId: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM posts WHERE conversation_id = ${conversationId}`.execute(db)
  return Number(rows[0]!.n)
}

beforeAll(async () => {
  env = await createTestEnv()
  dir = await mkdtemp(join(tmpdir(), 'threadline-export-'))
  api = await startApi(env)
  token = (await createApp(env.db, 'exporter')).bearer_token
  await startTestWriter(env)
  const queue = createQueue<PostsJob>('posts', {
    connection: env.redis,
    prefix: env.prefix,
    logger: env.logger,
  })
  env.defer(() => queue.close())
  // Shuffled batches: replies reach the writer before their parents.
  const lines = shuffle(stored, prng(9)).map(line)
  for (let i = 0; i < lines.length; i += 100) {
    await addPostsBatch(queue, env.redis, env.prefix, {
      source: 'test',
      observed_at: new Date().toISOString(),
      lines: lines.slice(i, i + 100),
    })
  }
  await waitFor(
    'every Post stored',
    async () => (await storedCount(env.db, fx.rootId)) === posts.length,
  )
})
afterAll(async () => {
  await rm(dir, { recursive: true, force: true })
  await env?.close()
})

const expected = () => expectedTree(fx.rootId, posts, 'oldest').nodes
const byId = new Map(stored.map((p) => [p.id, p]))

describe('GET /2/conversations/:conversation_id/export', () => {
  it('jsonl: a stream line per Post in tree order, which import rebuilds into the same conversation', async () => {
    const res = await exportOver('jsonl')
    expect(res.status).toBe(200)
    expect(res.type).toBe('application/x-ndjson')
    expect(res.disposition).toBe(`attachment; filename="conversation-${fx.rootId}.jsonl"`)
    const lines = res.body.toString('utf8').split('\n')
    expect(lines.pop()).toBe('')
    const items = lines.map(
      (l) =>
        JSON.parse(l) as {
          data: { id: string; text: string; referenced_tweets?: Array<{ id: string }> }
          includes: { users: Array<{ id: string }>; tweets?: Array<{ id: string }> }
        },
    )
    expect(items.map((i) => i.data.id)).toEqual(expected().map((n) => n.id))
    for (const item of items) {
      const p = byId.get(item.data.id)!
      expect(item.data.text).toBe(textOf(p))
      expect(item.includes.users.map((u) => u.id)).toEqual([p.author])
      const refs = [p.parent, p.quoted].filter((r): r is string => r != null && byId.has(r))
      expect((item.includes.tweets ?? []).map((t) => t.id).sort()).toEqual(
        [...new Set(refs)].sort(),
      )
    }

    // Into an empty store through `threadline import`: the same tree, the same Posts and authors.
    const file = join(dir, 'round-trip.jsonl')
    await writeFile(file, res.body)
    const fresh = await createTestEnv()
    try {
      const summary = await importFiles(fresh.config, fresh.logger, [file], { wait: true })
      expect(summary.rejected).toBe(0)
      const [a, b] = await Promise.all([
        readConversationTree(env.db, fx.rootId),
        readConversationTree(fresh.db, fx.rootId),
      ])
      expect(b.size).toBe(a.size)
      expect(b.meta).toEqual(a.meta)
      for (let p = 0; p < a.size; p++) {
        expect(b.idAt(p)).toBe(a.idAt(p))
        expect(b.threadAt(p)).toEqual(a.threadAt(p))
      }
      const rows = (db: Db) =>
        sql`SELECT p.id, p.conversation_id, p.author_id, p.in_reply_to_user_id, p.in_reply_to_post_id,
              p.text, p.created_at, p.lang, p.reply_count, p.like_count, p.retweet_count, p.quote_count,
              p.raw, u.username, u.name, u.raw AS user_raw
            FROM posts p LEFT JOIN users u ON u.id = p.author_id
            WHERE p.conversation_id = ${fx.rootId} ORDER BY p.id`.execute(db)
      const [before, after] = await Promise.all([rows(env.db), rows(fresh.db)])
      expect(after.rows).toHaveLength(posts.length)
      expect(after.rows).toEqual(before.rows)
    } finally {
      await fresh.close()
    }
  })

  it('csv: RFC 4180 that python’s csv module reads back, a record per Post in tree order', async () => {
    const res = await exportOver('csv')
    expect(res.status).toBe(200)
    expect(res.type).toBe('text/csv; charset=utf-8')
    const file = join(dir, 'export.csv')
    await writeFile(file, res.body)
    const table = (await python3(
      `import csv, json, sys
with open(sys.argv[1], newline='', encoding='utf-8') as f:
    print(json.dumps(list(csv.DictReader(f, strict=True))))`,
      file,
    )) as Array<Record<string, string>>
    const nodes = expected()
    expect(table.map((r) => r.id)).toEqual(nodes.map((n) => n.id))
    for (const [i, node] of nodes.entries()) {
      const p = byId.get(node.id)!
      expect(table[i]).toEqual({
        id: p.id,
        conversation_id: fx.rootId,
        parent_id: node.thread.parent_id ?? '',
        depth: String(node.thread.depth),
        author_id: p.author,
        author_username: `user_${p.author}`,
        created_at: new Date(p.ms).toISOString(),
        text: textOf(p),
        reply_count: String(p.replyCount),
        like_count: String(p.likes),
        retweet_count: '0',
        quote_count: '0',
        quoted_id: p.quoted ?? '',
        lang: 'en',
        missing_parent: String(node.thread.missing_parent === true),
        stored_reply_count: String(node.thread.reply_count),
        descendant_count: String(node.thread.descendant_count),
      })
    }
  })

  it('graphml: networkx reads a node per Post and per missing parent, and typed edges', async () => {
    const res = await exportOver('graphml')
    expect(res.status).toBe(200)
    expect(res.type).toBe('application/graphml+xml')
    const file = join(dir, 'export.graphml')
    await writeFile(file, res.body)
    const graph = (await python3(
      `import json, sys, networkx as nx
g = nx.read_graphml(sys.argv[1])
print(json.dumps({
  'directed': g.is_directed(),
  'nodes': {n: a for n, a in g.nodes(data=True)},
  'edges': sorted([s, t, a['type']] for s, t, a in g.edges(data=True)),
}))`,
      file,
    )) as {
      directed: boolean
      nodes: Record<string, Record<string, string | number | boolean>>
      edges: Array<[string, string, string]>
    }
    expect(graph.directed).toBe(true)
    const inFile = new Set([...posts.map((p) => p.id), fx.missingId])
    expect(Object.keys(graph.nodes).sort()).toEqual([...inFile].sort())
    expect(graph.nodes[fx.missingId]).toEqual({ missing: true })
    for (const node of expected()) {
      const p = byId.get(node.id)!
      expect(graph.nodes[p.id]).toEqual({
        author_id: p.author,
        username: `user_${p.author}`,
        created_at: new Date(p.ms).toISOString(),
        // What XML 1.0 cannot hold comes back as U+FFFD.
        text: textOf(p).replace('\u0007', '\uFFFD'),
        depth: node.thread.depth,
        missing: false,
      })
    }
    const edges = [
      ...posts.flatMap((p) => (p.parent ? [[p.id, p.parent, 'reply']] : [])),
      ...posts.flatMap((p) =>
        p.quoted && inFile.has(p.quoted) ? [[p.id, p.quoted, 'quote']] : [],
      ),
    ]
    expect(graph.edges).toEqual(edges.sort())
  })

  it('is in the OpenAPI document, with the live feed', async () => {
    const res = await fetch(`${api.url()}/2/openapi.json`)
    const doc = (await res.json()) as { paths: Record<string, { get?: unknown }> }
    expect(doc.paths['/2/conversations/{conversation_id}/export']?.get).toBeDefined()
    expect(doc.paths['/2/conversations/{conversation_id}/stream']?.get).toBeDefined()
  })

  it('answers an unknown format or a bad id with X’s 400, an unknown conversation with errors', async () => {
    const badFormat = await exportOver('xml')
    expect(badFormat.status).toBe(400)
    expect(JSON.parse(badFormat.body.toString())).toEqual({
      errors: [
        {
          parameters: { format: ['xml'] },
          message: 'The `format` query parameter value [xml] is not one of [jsonl,csv,graphml]',
        },
      ],
      title: 'Invalid Request',
      detail: 'One or more parameters to your request was invalid.',
      type: 'https://api.twitter.com/2/problems/invalid-request',
    })
    expect((await exportOver('csv', '12ab')).status).toBe(400)
    const unknown = await exportOver('csv', '42')
    expect(unknown.status).toBe(200)
    expect(JSON.parse(unknown.body.toString())).toEqual({
      errors: [expect.objectContaining({ resource_id: '42', parameter: 'conversation_id' })],
    })
  })
})

describe('threadline export', () => {
  const cli = (...args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'test/support/tuned-cli.ts', 'export', ...args], {
      env: { ...process.env, ...env.env },
      encoding: 'buffer',
      maxBuffer: 64 * 1024 * 1024,
    })

  it('writes the bytes the API sends, to stdout or to --out', async () => {
    for (const format of ['jsonl', 'csv', 'graphml']) {
      const http = await exportOver(format)
      const { stdout } = await cli(fx.rootId, '--format', format)
      expect(stdout.equals(http.body), `${format} on stdout`).toBe(true)
    }
    const out = join(dir, 'cli.graphml')
    await cli(fx.rootId, '--format', 'graphml', '--out', out)
    expect((await readFile(out)).equals((await exportOver('graphml')).body)).toBe(true)
  })

  it('refuses an unknown format and a conversation with nothing stored', async () => {
    await expect(cli(fx.rootId, '--format', 'xml')).rejects.toMatchObject({ code: 2 })
    await expect(cli('42')).rejects.toMatchObject({ code: 1 })
  })
})
