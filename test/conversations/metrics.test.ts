/**
 * Conversation metrics (docs/api.md §5.5) checked against networkx on generated trees, deep and
 * wide (python3 as a child process), and served by the API over a conversation stored by the
 * writer's statement: orphans under the root, the cache held by version, the app's CSV table.
 */
import { execFile, spawn, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { addRules, createApp, readConversationSkeleton, storeBatch } from '@threadline/db'
import {
  conversationMetrics,
  conversationShape,
  normalizeLines,
  wienerIndex,
  type SkeletonRows,
} from '@threadline/domain'
import { createTestEnv, prng, type TestEnv } from '@threadline/testing'
import { startApi } from '../support/api.js'
import { conversationFixture, streamLine } from './fixture.js'

const python = ['/usr/bin/python3', 'python3'].find(
  (bin) => spawnSync(bin, ['-c', 'import networkx'], { stdio: 'ignore' }).status === 0,
)

/** networkx's figures for a tree given as (child, parent) edges: the reference values. */
const NX = `
import json, sys
import networkx as nx
t = json.load(sys.stdin)
g = nx.Graph()
g.add_node(t["root"])
g.add_edges_from(t["edges"])
depths = nx.single_source_shortest_path_length(g, t["root"])
by_depth = {}
for d in depths.values(): by_depth[d] = by_depth.get(d, 0) + 1
h = max([h for h in range(0, max(depths.values()) + 1) if sum(1 for d in depths.values() if d >= h) >= h])
degrees = [d for _, d in g.degree()]
print(json.dumps({"n": g.number_of_nodes(), "wiener": int(nx.wiener_index(g)),
  "depth": max(depths.values()), "max_breadth": max(by_depth.values()), "h_index": h,
  "leaves": sum(1 for d in degrees if d == 1), "max_degree": max(degrees)}))
`

async function networkx(root: string, edges: Array<[string, string]>) {
  if (!python) throw new Error('no python3 with networkx on this machine (.ci/run installs it)')
  const child = spawn(python, ['-c', NX], { stdio: ['pipe', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => (out += d.toString()))
  child.stdin.end(JSON.stringify({ root, edges }))
  await new Promise<void>((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`python3: ${code}`))))
  })
  return JSON.parse(out) as Record<string, number>
}

/** A tree of `n` Posts: each picks its parent by `parentOf(i)` among Posts 0..i-1. */
function tree(n: number, parentOf: (i: number) => number): SkeletonRows {
  const ids = Array.from({ length: n }, (_, i) => String(1_000_000 + i))
  return {
    ids,
    parents: ids.map((_, i) => (i === 0 ? null : ids[parentOf(i)]!)),
    authors: ids.map((_, i) => String(i % 17)),
    createdMs: Float64Array.from(ids, (_, i) => 1_700_000_000_000 + i * 1000 + (i % 7) * 300),
    likes: new Int32Array(n),
  }
}

const random = prng(48)
const TREES: Record<string, SkeletonRows> = {
  // A chain 600 deep with short branches off it.
  deep: tree(900, (i) => (i < 600 ? i - 1 : Math.floor(random() * 600))),
  // The root's 700 replies and a few below them.
  wide: tree(800, (i) => (i <= 700 ? 0 : 1 + Math.floor(random() * 700))),
  // Random recursive, biased to recent Posts so that several chains grow.
  random: tree(900, (i) => i - 1 - Math.floor(random() * random() * Math.min(i, 40))),
}

describe('metrics equal networkx’s on generated trees (n ≤ 900: all pairs in python)', () => {
  it.each(Object.keys(TREES))('%s', async (name) => {
    const rows = TREES[name]!
    const root = rows.ids[0]!
    const edges = rows.ids.slice(1).map((id, i) => [id, rows.parents[i + 1]!] as [string, string])
    const nx = await networkx(root, edges)
    const { shape } = conversationShape(root, rows)
    const m = conversationMetrics(root, rows, undefined)!
    expect(wienerIndex(shape)).toBe(nx.wiener)
    expect(m.structural_virality).toBe((2 * nx.wiener!) / (nx.n! * (nx.n! - 1)))
    expect(m.post_count).toBe(nx.n)
    expect(m.depth).toBe(nx.depth)
    expect(m.max_breadth).toBe(nx.max_breadth)
    expect(m.h_index).toBe(nx.h_index)
  })

  it('a lone root: virality 0, depth 0, h-index 0', () => {
    const m = conversationMetrics(
      '1000000',
      tree(1, () => 0),
      0,
    )!
    expect(m).toMatchObject({ post_count: 1, structural_virality: 0, depth: 0, h_index: 0 })
    expect(m.coverage).toBeUndefined()
  })
})

describe('GET /2/conversations/:id/metrics and /2/conversations/metrics?format=csv', () => {
  let env: TestEnv
  let api: ApiServer
  let token: string
  let appId: string
  const fx = conversationFixture(48)
  // Every Post but the parent that never arrives: its subtree is orphaned under the root.
  const stored = fx.posts.filter((p) => p.id !== fx.missingId)
  const store = (lines: string[]) =>
    storeBatch(env.db, normalizeLines(lines, new Date().toISOString()), 'test')

  beforeAll(async () => {
    env = await createTestEnv()
    api = await startApi(env)
    const app = await createApp(env.db, 'metrics')
    token = app.bearer_token
    appId = app.app_id
    for (let i = 0; i < stored.length; i += 200)
      await store(stored.slice(i, i + 200).map(streamLine))
  })
  afterAll(() => env?.close())

  const get = async (path: string) => {
    const res = await fetch(`${api.url()}${path}`, {
      headers: { authorization: `Bearer ${token}` },
    })
    return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
  }

  it('every member, over the stored tree with orphans under the root, equal to networkx', async () => {
    const res = await get(`/2/conversations/${fx.rootId}/metrics`)
    expect(res.status).toBe(200)
    const { data } = JSON.parse(res.text)
    const byId = new Map(stored.map((p) => [p.id, p]))
    const edges = stored
      .filter((p) => p.id !== fx.rootId)
      .map((p) => [p.id, byId.has(p.parent!) ? p.parent! : fx.rootId] as [string, string])
    const nx = await networkx(fx.rootId, edges)
    const replies = stored.filter((p) => p.id !== fx.rootId)
    const ms = replies.map((p) => p.ms).sort((a, b) => a - b)
    const gaps = ms
      .slice(1)
      .map((t, i) => t - ms[i]!)
      .sort((a, b) => a - b)
    const mid = gaps.length >> 1
    const root = byId.get(fx.rootId)!
    expect(data).toEqual({
      conversation_id: fx.rootId,
      post_count: stored.length,
      reply_count: replies.length,
      author_count: new Set(stored.map((p) => p.author)).size,
      root_author_reply_share:
        replies.filter((p) => p.author === root.author).length / replies.length,
      depth: nx.depth,
      max_breadth: nx.max_breadth,
      structural_virality: (2 * nx.wiener!) / (nx.n! * (nx.n! - 1)),
      h_index: nx.h_index,
      first_reply_seconds: (ms[0]! - root.ms) / 1000,
      median_reply_gap_seconds:
        (gaps.length % 2 ? gaps[mid]! : (gaps[mid - 1]! + gaps[mid]!) / 2) / 1000,
      first_post_at: new Date(root.ms).toISOString(),
      last_post_at: new Date(ms.at(-1)!).toISOString(),
      missing_parent_count: fx.posts.filter((p) => p.parent === fx.missingId).length,
      coverage: replies.length / root.replyCount,
    })
  })

  it('growth: contiguous UTC buckets from the root to the last Post, with running totals', async () => {
    const { data } = JSON.parse(
      (await get(`/2/conversations/${fx.rootId}/metrics?granularity=day`)).text,
    )
    const growth = data.growth as Array<{
      start: string
      end: string
      tweet_count: number
      total: number
    }>
    expect(growth[0]!.start).toBe(
      new Date(Math.floor(fx.posts[0]!.ms / 86_400_000) * 86_400_000).toISOString(),
    )
    for (let i = 1; i < growth.length; i++) expect(growth[i]!.start).toBe(growth[i - 1]!.end)
    expect(growth.at(-1)!.total).toBe(stored.length)
    expect(growth.reduce((s, b) => s + b.tweet_count, 0)).toBe(stored.length)
    expect((await get(`/2/conversations/${fx.rootId}/metrics?granularity=week`)).status).toBe(400)
  })

  it('held by version: unchanged answers the same; a stored reply changes it at once', async () => {
    const before = JSON.parse((await get(`/2/conversations/${fx.rootId}/metrics`)).text).data
    expect(JSON.parse((await get(`/2/conversations/${fx.rootId}/metrics`)).text).data).toEqual(
      before,
    )
    // The missing parent arrives: its orphans are orphans no more.
    await store([streamLine(fx.posts.find((p) => p.id === fx.missingId)!)])
    const after = JSON.parse((await get(`/2/conversations/${fx.rootId}/metrics`)).text).data
    expect(after.post_count).toBe(before.post_count + 1)
    expect(after.missing_parent_count).toBe(0)
    const skeleton = await readConversationSkeleton(env.db, fx.rootId)
    expect(after).toMatchObject(
      conversationMetrics(fx.rootId, skeleton.rows, skeleton.reportedReplyCount)!,
    )
  })

  it('an unknown conversation is the tree’s error item', async () => {
    const body = JSON.parse((await get('/2/conversations/42/metrics')).text)
    expect(body.errors[0]).toMatchObject({ parameter: 'conversation_id', value: '42' })
  })

  it('the app’s table: a CSV row per followed conversation, every member a column', async () => {
    const rules = [{ value: `conversation_id:${fx.rootId}` }, { value: 'conversation_id:42' }]
    await addRules(env.db, appId, rules, { cap: 10 })
    const res = await get('/2/conversations/metrics?format=csv')
    expect(res.status).toBe(200)
    expect(res.type).toBe('text/csv; charset=utf-8')
    const [header, ...rows] = res.text.trimEnd().split('\r\n')
    expect(header!.split(',')).toEqual([
      'conversation_id',
      'post_count',
      'reply_count',
      'author_count',
      'root_author_reply_share',
      'depth',
      'max_breadth',
      'structural_virality',
      'h_index',
      'first_reply_seconds',
      'median_reply_gap_seconds',
      'first_post_at',
      'last_post_at',
      'missing_parent_count',
      'coverage',
    ])
    expect(rows.map((r) => r.split(',')[0])).toEqual(['42', fx.rootId])
    expect(rows[0]).toBe('42' + ','.repeat(14))
    const data = JSON.parse((await get(`/2/conversations/${fx.rootId}/metrics`)).text).data
    expect(rows[1]!.split(',')[7]).toBe(String(data.structural_virality))
  })
  it('threadline export --metrics writes the bytes the API sends', async () => {
    const run = promisify(execFile)
    const cli = (...args: string[]) =>
      run(process.execPath, ['--import', 'tsx', 'test/support/tuned-cli.ts', 'export', ...args], {
        env: { ...process.env, ...env.env },
      })
    const http = await get('/2/conversations/metrics?format=csv')
    // Without --app, every app's followed conversations: one app here (one run: tsx starts slowly).
    expect((await cli('--metrics')).stdout).toBe(http.text)
  })
})
