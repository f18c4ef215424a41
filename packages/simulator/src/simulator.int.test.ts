import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { compareIds } from '@threadline/domain'
import { createSimulator, type Simulator, type SimulatorOptions } from './simulator.js'

const TOKEN = 'test-token'
const auth = { authorization: `Bearer ${TOKEN}` }
const ALL =
  'tweet.fields=attachments,author_id,conversation_id,created_at,edit_controls,edit_history_tweet_ids,entities,in_reply_to_user_id,lang,possibly_sensitive,public_metrics,referenced_tweets,reply_settings' +
  '&user.fields=created_at,description,location,profile_image_url,protected,public_metrics,url,verified,verified_type' +
  '&expansions=author_id,in_reply_to_user_id,referenced_tweets.id,referenced_tweets.id.author_id,entities.mentions.username'

/** Polls `check` until it holds; fails with `what` after the deadline. */
async function until<T>(what: string, check: () => T | undefined | false, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const v = check()
    if (v !== undefined && v !== false) return v
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

interface StreamClient {
  status: number
  headers: Headers
  raw: () => string
  /** Complete lines (without their \r\n), keep-alives as ''. */
  lines: () => string[]
  posts: () => {
    data: { id: string; conversation_id?: string; created_at?: string }
    matching_rules: unknown[]
  }[]
  ended: () => boolean
  close: () => void
}

const openStreams: StreamClient[] = []

async function openStream(sim: Simulator, query = ALL): Promise<StreamClient> {
  const ac = new AbortController()
  const res = await fetch(`${sim.url}/2/tweets/search/stream?${query}`, {
    headers: auth,
    signal: ac.signal,
  })
  let raw = ''
  let ended = false
  if (res.body) {
    const reader = res.body.getReader()
    const decoder = new TextDecoder()
    void (async () => {
      try {
        for (;;) {
          const { done, value } = await reader.read()
          if (done) break
          raw += decoder.decode(value, { stream: true })
        }
      } catch {
        // aborted by the test, or dropped by a fault
      }
      ended = true
    })()
  }
  const lines = () => {
    const parts = raw.split('\r\n')
    parts.pop()
    return parts
  }
  const client: StreamClient = {
    status: res.status,
    headers: res.headers,
    raw: () => raw,
    lines,
    posts: () =>
      lines()
        .filter((l) => l.startsWith('{"data"'))
        .map((l) => JSON.parse(l) as ReturnType<StreamClient['posts']>[number]),
    ended: () => ended,
    close: () => ac.abort(),
  }
  openStreams.push(client)
  return client
}

async function call(sim: Simulator, path: string, init: RequestInit = {}) {
  const res = await fetch(`${sim.url}${path}`, {
    ...init,
    headers: { ...auth, ...(init.body ? { 'content-type': 'application/json' } : {}) },
  })
  return { status: res.status, headers: res.headers, body: (await res.json()) as any }
}

const addRule = (sim: Simulator, value: string, tag?: string) =>
  call(sim, '/2/tweets/search/stream/rules', {
    method: 'POST',
    body: JSON.stringify({ add: [{ value, ...(tag !== undefined ? { tag } : {}) }] }),
  })

describe('simulator over HTTP', () => {
  let sim: Simulator

  beforeAll(async () => {
    sim = createSimulator({
      port: 0,
      rate: 0,
      seed: 3,
      bearerToken: TOKEN,
      keepAliveMs: 100,
      world: { users: 300, historyPosts: 6000 },
    })
    await sim.start()
  })

  afterEach(async () => {
    for (const s of openStreams.splice(0)) s.close()
    sim.faults.reset()
    await until('streams closed', () => sim.stats().streamConnections === 0)
    await call(sim, '/2/tweets/search/stream/rules?delete_all=true', { method: 'POST' })
  })

  afterAll(async () => {
    await sim.close()
  })

  it('refuses a missing or wrong bearer token', async () => {
    const res = await fetch(`${sim.url}/2/tweets/1`)
    expect(res.status).toBe(401)
    const wrong = await fetch(`${sim.url}/2/tweets/1`, { headers: { authorization: 'Bearer x' } })
    expect(wrong.status).toBe(401)
    expect(await wrong.json()).toMatchObject({ title: 'Unauthorized', status: 401 })
  })

  it('adds, lists and deletes rules with X bodies', async () => {
    const created = await addRule(sim, 'conversation_id:111', 'first')
    expect(created.status).toBe(201)
    expect(created.headers.get('x-rate-limit-remaining')).toMatch(/^\d+$/)
    const rule = created.body.data[0]
    expect(rule).toEqual({
      value: 'conversation_id:111',
      tag: 'first',
      id: expect.stringMatching(/^\d+$/),
    })
    expect(created.body.meta.summary).toEqual({ created: 1, not_created: 0, valid: 1, invalid: 0 })

    const dup = await addRule(sim, 'conversation_id:111')
    expect(dup.status).toBe(200)
    expect(dup.body.errors[0]).toMatchObject({
      value: 'conversation_id:111',
      id: rule.id,
      title: 'DuplicateRule',
    })

    const bad = await addRule(sim, 'nonsense:1')
    expect(bad.body.errors[0]).toMatchObject({
      title: 'UnprocessableEntity',
      details: [expect.any(String)],
    })

    const dry = await call(sim, '/2/tweets/search/stream/rules?dry_run=True', {
      method: 'POST',
      body: JSON.stringify({ add: [{ value: 'conversation_id:222' }] }),
    })
    expect(dry.status).toBe(201)
    const list = await call(sim, '/2/tweets/search/stream/rules')
    expect(list.body.data).toEqual([rule])
    expect(list.body.meta.result_count).toBe(1)

    await addRule(sim, 'conversation_id:333')
    const byValue = await call(sim, '/2/tweets/search/stream/rules', {
      method: 'POST',
      body: JSON.stringify({ delete: { values: ['conversation_id:333'] } }),
    })
    expect(byValue.body.meta.summary).toEqual({ deleted: 1, not_deleted: 0 })
    const byId = await call(sim, '/2/tweets/search/stream/rules', {
      method: 'POST',
      body: JSON.stringify({ delete: { ids: [rule.id, '999'] } }),
    })
    expect(byId.body.meta.summary).toEqual({ deleted: 1, not_deleted: 1 })
    expect(byId.body.errors).toHaveLength(1)
    const empty = await call(sim, '/2/tweets/search/stream/rules')
    expect(empty.body).toEqual({ meta: { sent: expect.any(String), result_count: 0 } })

    const notJson = await fetch(`${sim.url}/2/tweets/search/stream/rules`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: '{}',
    })
    expect(notJson.status).toBe(400)
  })

  it('answers 409 to a stream connect without rules, 429 past one connection', async () => {
    const none = await openStream(sim)
    expect(none.status).toBe(409)
    await until('409 body', () => none.ended())
    expect(JSON.parse(none.raw())).toMatchObject({ connection_issue: 'RuleConfigurationIssue' })

    await addRule(sim, 'conversation_id:1')
    const first = await openStream(sim)
    expect(first.status).toBe(200)
    const second = await openStream(sim)
    expect(second.status).toBe(429)
    await until('429 body', () => second.ended())
    expect(JSON.parse(second.raw())).toMatchObject({ connection_issue: 'TooManyConnections' })
  })

  it('streams matching Posts as \\r\\n-framed lines with includes, matching_rules and keep-alives', async () => {
    const [conv] = sim.demoConversations()
    const { body } = await addRule(sim, `conversation_id:${conv}`, 'demo')
    const ruleId = body.data[0].id as string
    await addRule(sim, 'conversation_id:42') // matches nothing: must not show in matching_rules
    const stream = await openStream(sim)
    expect(stream.status).toBe(200)
    expect(stream.headers.get('content-type')).toContain('application/json')
    // Keep-alives while idle.
    await until('a keep-alive', () => stream.lines().includes(''))
    sim.resetSent()
    const sent = [sim.reply(conv!), sim.reply(conv!), sim.reply(conv!)]
    // Mostly other conversations' Posts (a few may be replies in this one: demos keep getting them).
    const more = sim.emit(50).filter((p) => p.conversationId === conv)
    const expected = [...sent, ...more].map((p) => p.id)
    await until('the Posts', () => stream.posts().length >= expected.length)
    const posts = stream.posts()
    expect(posts.map((p) => p.data.id)).toEqual(expected)
    for (const line of posts) {
      expect(line.data.conversation_id).toBe(conv)
      expect(line.matching_rules).toEqual([{ id: ruleId, tag: 'demo' }])
    }
    const first = JSON.parse(stream.lines().find((l) => l.startsWith('{"data"'))!)
    expect(first.data).toMatchObject({
      author_id: expect.any(String),
      created_at: expect.any(String),
    })
    expect(first.includes.users.map((u: { id: string }) => u.id)).toContain(first.data.author_id)
    expect(first.includes.tweets.map((t: { id: string }) => t.id)).toContain(
      first.data.referenced_tweets[0].id,
    )
    // Framing: every newline is part of \r\n.
    expect(/[^\r]\n/.test(stream.raw())).toBe(false)
    // The record of what was sent, per rule.
    const record = sim.stats().sent
    expect(record.byRule[ruleId]!.ids).toEqual(expected)
    expect(record.total).toBe(expected.length)
  })

  it('replays the last minutes with backfill_minutes', async () => {
    const [, conv] = sim.demoConversations()
    const made = [sim.reply(conv!), sim.reply(conv!)]
    await addRule(sim, `conversation_id:${conv}`)
    const stream = await openStream(sim, `${ALL}&backfill_minutes=2`)
    // The replay holds every Post from the last two minutes that the rules match (earlier tests'
    // rules and Posts too), so wait for the two made here rather than for any two lines.
    const ids = () => stream.posts().map((p) => p.data.id)
    await until('the replayed Posts', () => made.every((p) => ids().includes(p.id)))
  })

  it('pages through search/all: every Post of a conversation exactly once, newest first', async () => {
    const conv = sim.demoConversations()[0]!
    const expected = sim.world.conversation(conv)!.map((p) => p.id)
    expect(expected.length).toBeGreaterThan(250)
    const seen: string[] = []
    let token: string | undefined
    let pages = 0
    do {
      const page = await call(
        sim,
        `/2/tweets/search/all?query=conversation_id:${conv}&max_results=100&${ALL}` +
          (token ? `&next_token=${token}` : ''),
      )
      expect(page.status).toBe(200)
      expect(page.body.data.length).toBeGreaterThan(0)
      expect(page.body.meta.result_count).toBe(page.body.data.length)
      seen.push(...page.body.data.map((p: { id: string }) => p.id))
      token = page.body.meta.next_token
      pages++
    } while (token)
    expect(pages).toBe(Math.ceil(expected.length / 100))
    expect(new Set(seen).size).toBe(seen.length)
    expect([...seen].sort(compareIds)).toEqual([...expected].sort(compareIds))
    expect(seen).toEqual([...seen].sort((a, b) => compareIds(b, a)))
  })

  it('keeps search/recent to the last 7 days', async () => {
    const old = sim.demoConversations().find((id) => {
      const root = sim.world.get(id)!
      return root.createdMs < Date.now() - 7 * 86_400_000
    })!
    const cutoff = Date.now() - 7 * 86_400_000
    const inWindow = sim.world.conversation(old)!.filter((p) => p.createdMs >= cutoff + 5000)
    const seen = new Set<string>()
    let token: string | undefined
    do {
      const page = await call(
        sim,
        `/2/tweets/search/recent?query=conversation_id:${old}&max_results=100` +
          (token ? `&pagination_token=${token}` : ''),
      )
      for (const p of page.body.data ?? []) seen.add(p.id)
      token = page.body.meta.next_token
    } while (token)
    expect(seen.has(old)).toBe(false) // the root is older than the window
    for (const p of inWindow) expect(seen.has(p.id)).toBe(true)
    const tooEarly = new Date(Date.now() - 8 * 86_400_000).toISOString()
    const refused = await call(
      sim,
      `/2/tweets/search/recent?query=conversation_id:${old}&start_time=${tooEarly}`,
    )
    expect(refused.status).toBe(400)
    expect(refused.body.errors[0].message).toMatch(/'start_time' must be on or after/)
    const bad = await call(
      sim,
      `/2/tweets/search/recent?query=conversation_id:${old}&max_results=5`,
    )
    expect(bad.body.errors[0].message).toBe(
      'The `max_results` query parameter value [5] is not between 10 and 100',
    )
    const empty = await call(sim, '/2/tweets/search/recent?query=conversation_id:12345')
    expect(empty.body).toEqual({ meta: { result_count: 0 } })
  })

  it('searches with other queries of the X language through the query package', async () => {
    const page = await call(
      sim,
      '/2/tweets/search/all?query=RT%20is:retweet&max_results=50&tweet.fields=referenced_tweets',
    )
    expect(page.body.data.length).toBe(50)
    for (const p of page.body.data) expect(p.referenced_tweets[0].type).toBe('retweeted')
  })

  it('looks Posts up by ids with X not-found errors', async () => {
    const root = sim.demoConversations()[0]!
    const many = await call(sim, `/2/tweets?ids=${root},1234&${ALL}`)
    expect(many.status).toBe(200)
    expect(many.body.data.map((p: { id: string }) => p.id)).toEqual([root])
    expect(many.body.errors).toEqual([
      expect.objectContaining({
        value: '1234',
        detail: 'Could not find tweet with ids: [1234].',
        resource_type: 'tweet',
        parameter: 'ids',
      }),
    ])
    const one = await call(sim, `/2/tweets/${root}?tweet.fields=conversation_id`)
    expect(one.body.data).toEqual({
      id: root,
      text: expect.any(String),
      conversation_id: root,
    })
    const missing = await call(sim, '/2/tweets/1234')
    expect(missing.body.data).toBeUndefined()
    expect(missing.body.errors[0].parameter).toBe('id')
    const invalid = await call(sim, '/2/tweets?ids=12,foo')
    expect(invalid.status).toBe(400)
    const unknown = await call(sim, `/2/tweets?ids=${root}&foo=1`)
    expect(unknown.body.errors[0].message).toMatch(/^The query parameter \[foo\] is not one of/)
    const user = sim.world.users[0]!
    const users = await call(sim, `/2/users?ids=${user.id}`)
    expect(users.body.data).toEqual([
      { id: user.id, name: user.wire.name, username: user.username },
    ])
  })

  describe('faults', () => {
    it('answers the next connects with 429 (and x-rate-limit-reset) or 503', async () => {
      await addRule(sim, 'conversation_id:1')
      sim.faults.failNext(1, { status: 429, resetSeconds: 30 })
      sim.faults.failNext(1, { status: 503 })
      const limited = await openStream(sim)
      expect(limited.status).toBe(429)
      expect(Number(limited.headers.get('x-rate-limit-reset'))).toBeGreaterThan(
        Date.now() / 1000 + 20,
      )
      const unavailable = await openStream(sim)
      expect(unavailable.status).toBe(503)
      const ok = await openStream(sim)
      expect(ok.status).toBe(200)
    })

    it('also over the admin route, for a simulator run as a process', async () => {
      await addRule(sim, 'conversation_id:1')
      const r = await call(sim, '/_sim/faults', {
        method: 'POST',
        body: JSON.stringify({ fault: 'fail', count: 1, status: 429 }),
      })
      expect(r.status).toBe(200)
      expect((await openStream(sim)).status).toBe(429)
      const demo = await call(sim, '/_sim/demo')
      expect(demo.body.conversation_ids).toEqual(sim.demoConversations())
      const sent = await call(sim, '/_sim/sent')
      expect(sent.body).toHaveProperty('total')
    })

    it('drops every stream connection', async () => {
      await addRule(sim, 'conversation_id:1')
      const stream = await openStream(sim)
      expect(sim.faults.dropStreams()).toBe(1)
      await until('the stream to end', () => stream.ended())
    })

    it('goes silent, without keep-alives, then speaks again', async () => {
      const conv = sim.demoConversations()[1]!
      await addRule(sim, `conversation_id:${conv}`)
      const stream = await openStream(sim)
      await until('a keep-alive', () => stream.lines().length > 0)
      sim.faults.silence(600)
      const before = stream.raw().length
      const lost = sim.reply(conv)
      // Three keep-alive intervals with nothing at all.
      const quietUntil = Date.now() + 400
      await until('the quiet period', () => Date.now() > quietUntil)
      expect(stream.raw().length).toBe(before)
      await until('keep-alives again', () => stream.raw().length > before, 3000)
      const after = sim.reply(conv)
      await until('a Post after the silence', () =>
        stream.posts().some((p) => p.data.id === after.id),
      )
      expect(stream.posts().some((p) => p.data.id === lost.id)).toBe(false)
    })

    it('emits malformed lines', async () => {
      await addRule(sim, 'conversation_id:1')
      const stream = await openStream(sim)
      sim.faults.malformed(1, 'truncated')
      sim.faults.malformed(1, 'not-json')
      await until('two bad lines', () => stream.lines().filter((l) => l !== '').length >= 2)
      for (const line of stream.lines().filter((l) => l !== '')) {
        expect(() => JSON.parse(line)).toThrow()
      }
    })

    it('duplicates Posts', async () => {
      const conv = sim.demoConversations()[0]!
      await addRule(sim, `conversation_id:${conv}`)
      const stream = await openStream(sim)
      sim.faults.duplicateNext(1)
      const post = sim.reply(conv)
      const next = sim.reply(conv)
      await until('three lines', () => stream.posts().length >= 3)
      expect(stream.posts().map((p) => p.data.id)).toEqual([post.id, post.id, next.id])
    })

    it('delivers a reply before its parent', async () => {
      const conv = sim.demoConversations()[0]!
      await addRule(sim, `conversation_id:${conv}`)
      const stream = await openStream(sim)
      sim.faults.reorderNext(2)
      const parent = sim.reply(conv)
      const child = sim.reply(conv, parent.id)
      await until('both Posts', () => stream.posts().length >= 2)
      expect(stream.posts().map((p) => p.data.id)).toEqual([child.id, parent.id])
    })
  })
})

describe('simulator lifecycle', () => {
  it('generates at its rate and closes promptly with a client connected', async () => {
    const sim = createSimulator({
      port: 0,
      rate: 200,
      bearerToken: TOKEN,
      world: { users: 100, historyPosts: 1000 },
    })
    await sim.start()
    try {
      const conv = sim.demoConversations()[0]!
      await addRule(sim, `conversation_id:${conv}`)
      await addRule(sim, `conversation_id:${sim.demoConversations()[1]!}`)
      const stream = await openStream(sim)
      const start = sim.stats().generated
      await until('live Posts', () => sim.stats().generated > start + 50)
      await until('a delivered Post', () => stream.posts().length > 0, 10_000)
      const started = Date.now()
      await sim.close()
      expect(Date.now() - started).toBeLessThan(2000)
      await until('the stream to end', () => stream.ended())
      expect(stream.raw()).toContain('OperationalDisconnect')
    } finally {
      for (const s of openStreams.splice(0)) s.close()
      await sim.close()
    }
  })

  /** A simulator whose one rule, `everything`, matches every Post; keep-alives after 50 ms. */
  const fixedCountSimulator = (options: SimulatorOptions) =>
    createSimulator({
      port: 0,
      keepAliveMs: 50,
      bearerToken: TOKEN,
      world: { users: 100, historyPosts: 200 },
      compileRule: (value) =>
        value === 'everything'
          ? { ok: true, rule: { test: () => true } }
          : { ok: false, reason: 'only "everything" here' },
      ...options,
    })

  /** Streams `count` Posts, then waits until two keep-alives show that no more are coming. */
  async function streamUntilQuiet(sim: Simulator, count: number) {
    await addRule(sim, 'everything')
    const stream = await openStream(sim)
    await until(`${count} Posts streamed`, () => stream.posts().length >= count)
    // Keep-alives come only after 50 ms without a line: once two have come, generation is over.
    await until('two keep-alives after the last Post', () => {
      const lines = stream.lines()
      const last = lines.findLastIndex((l) => l !== '')
      return lines.length - 1 - last >= 2
    })
    return stream.posts()
  }

  it('with stopAfter, waits for a reader, makes exactly that many Posts, then only keep-alives', async () => {
    const sim = fixedCountSimulator({ rate: 2_000, stopAfter: 120 })
    await sim.start()
    try {
      const before = sim.stats().generated
      expect(await streamUntilQuiet(sim, 120)).toHaveLength(120)
      expect(sim.stats().generated - before).toBe(120)
    } finally {
      for (const s of openStreams.splice(0)) s.close()
      await sim.close()
    }
  })

  it('replays backfill_minutes at the reader’s pace: only what the rules match, and no slow-reader cut', async () => {
    const sim = fixedCountSimulator({
      rate: 0,
      // A replay of ≈ 1,500 lines is ≈ 50 times this: written at once, it would cut the reader off.
      maxStreamBufferBytes: 64 * 1024,
      slowReader: 'disconnect',
      compileRule: (value) =>
        value === 'even'
          ? { ok: true, rule: { test: (post) => Number(post.id.at(-1)) % 2 === 0 } }
          : { ok: false, reason: 'only "even" here' },
    })
    await sim.start()
    try {
      // Made while no stream is open: they reach a reader only through the replay.
      const made = sim.emit(3_000)
      const even = made.filter((p) => Number(p.id.at(-1)) % 2 === 0).map((p) => p.id)
      expect(even.length).toBeGreaterThan(1_000)
      expect(even.length).toBeLessThan(made.length)
      await addRule(sim, 'even')
      const stream = await openStream(sim, `${ALL}&backfill_minutes=1`)
      await until(
        'every matching Post replayed',
        () => {
          const ids = new Set(stream.posts().map((p) => p.data.id))
          return even.every((id) => ids.has(id))
        },
        10_000,
      )
      const posts = stream.posts()
      expect(posts.every((p) => Number(p.data.id.at(-1)) % 2 === 0)).toBe(true)
      expect(posts.every((p) => p.matching_rules.length === 1)).toBe(true)
      expect(stream.raw()).not.toContain('SlowReader')
      expect(stream.ended()).toBe(false)
      expect(sim.stats().streamConnections).toBe(1)
    } finally {
      for (const s of openStreams.splice(0)) s.close()
      await sim.close()
    }
  })

  it('keeps the ids of what it sent up to a limit, and its stats over HTTP hold counts only', async () => {
    const sim = fixedCountSimulator({ rate: 0, recordLimit: 10 })
    await sim.start()
    try {
      await addRule(sim, 'everything')
      const stream = await openStream(sim)
      await until('the stream open', () => sim.stats().streamConnections === 1)
      const made = sim.emit(30).map((p) => p.id)
      await until('30 Posts streamed', () => stream.posts().length >= 30)
      const sent = (await call(sim, '/_sim/sent')).body
      expect(sent.total).toBe(30)
      expect(sent.ids).toEqual(made.slice(0, 10))
      expect(sent.truncated).toBe(true)
      const [rule] = Object.values(sent.byRule) as { count: number; ids: string[] }[]
      expect(rule!.count).toBe(30)
      expect(rule!.ids).toHaveLength(10)
      const stats = (await call(sim, '/_sim/stats')).body
      const ruleId = Object.keys(sent.byRule)[0]!
      expect(stats.sent).toEqual({
        total: 30,
        truncated: true,
        byRule: { [ruleId]: { value: 'everything', tag: '', count: 30 } },
      })
    } finally {
      for (const s of openStreams.splice(0)) s.close()
      await sim.close()
    }
  })

  it('bursts: renders all its Posts first, then writes them as the reader takes them', async () => {
    const sim = fixedCountSimulator({
      rate: 0,
      // Far less than 3,000 lines: the writes must stop on a full buffer and resume on drain.
      maxStreamBufferBytes: 64 * 1024,
      slowReader: 'pause',
    })
    await sim.start()
    try {
      await addRule(sim, 'everything')
      const stream = await openStream(sim)
      await until('the stream open', () => sim.stats().streamConnections === 1)
      const atMs = Date.now()
      expect(sim.burst(3_000, atMs)).toBe(3_000)
      await until('3,000 Posts streamed', () => stream.posts().length >= 3_000)
      const ids = stream.posts().map((p) => p.data.id)
      expect(ids).toHaveLength(3_000)
      expect(new Set(ids).size).toBe(3_000)
      expect(sim.stats().generated).toBe(3_000)
      expect(sim.stats().sent.total).toBe(3_000)
      // None older than the burst's time: a bench tells a burst's Posts from earlier ones by it.
      const created = stream.posts().map((p) => Date.parse(p.data.created_at!))
      expect(Math.min(...created)).toBeGreaterThanOrEqual(atMs)
    } finally {
      for (const s of openStreams.splice(0)) s.close()
      await sim.close()
    }
  })
})

describe('simulator as X without Enterprise access', () => {
  it('refuses backfill_minutes with a 400 naming it, and records what it made while no one listened', async () => {
    const sim = createSimulator({
      port: 0,
      rate: 0,
      seed: 5,
      bearerToken: TOKEN,
      grantBackfill: false,
    })
    await sim.start()
    try {
      const [conv] = sim.demoConversations()
      await addRule(sim, `conversation_id:${conv}`)
      const unheard = sim.reply(conv!)
      const refused = await call(sim, `/2/tweets/search/stream?${ALL}&backfill_minutes=1`)
      expect(refused.status).toBe(400)
      expect(JSON.stringify(refused.body)).toContain('backfill_minutes')
      const stream = await openStream(sim)
      expect(stream.status).toBe(200)
      const heard = sim.reply(conv!)
      await until('the live Post', () => stream.posts().some((p) => p.data.id === heard.id))
      expect(stream.posts().map((p) => p.data.id)).not.toContain(unheard.id)
      expect(sim.stats().sent.unheard).toEqual([unheard.id])
      expect(sim.stats().sent.ids).toEqual([heard.id])
      stream.close()
    } finally {
      await sim.close()
    }
  })
})
