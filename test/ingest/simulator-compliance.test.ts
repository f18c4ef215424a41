import { request } from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSimulator, type Simulator } from '@threadline/simulator'
import { waitFor } from '@threadline/testing'
import { assertXSchema } from '@threadline/testing/api'

/**
 * The simulator's compliance side against X's shapes (x-api-v2-openapi.json): the world's
 * withdrawals on the two compliance streams (partitions, replays), batch compliance jobs with
 * their signed transfer URLs, and lookup of a withdrawn Post.
 */
const TOKEN = 'sim-token'
let sim: Simulator
const auth = { authorization: `Bearer ${TOKEN}` }

beforeAll(async () => {
  sim = createSimulator({
    port: 0,
    rate: 0,
    seed: 7,
    bearerToken: TOKEN,
    keepAliveMs: 100,
    complianceJobMs: 30,
    world: { users: 50, historyPosts: 300, demoConversations: 1 },
  })
  await sim.start()
})
afterAll(() => sim?.close())

/** Reads a compliance stream for `ms`, returning its lines (keep-alives left out). */
function readStream(path: string, ms: number): Promise<{ status: number; lines: string[] }> {
  return new Promise((resolve, reject) => {
    const req = request(`${sim.url}${path}`, { headers: auth }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => (text += c))
      const done = () => {
        clearTimeout(timer)
        const lines = text.split('\r\n').filter((l) => l.trim() !== '')
        resolve({ status: res.statusCode ?? 0, lines })
      }
      res.on('end', done)
      res.on('close', done)
      const timer = setTimeout(() => res.destroy(), ms)
    })
    req.on('error', reject)
    req.end()
  })
}

const posts = () => [...sim.world.newestFirst()].filter((p) => p.kind !== 'retweet')

describe('compliance streams', () => {
  it('need a partition 1–4, as X', async () => {
    const none = await fetch(`${sim.url}/2/tweets/compliance/stream`, { headers: auth })
    expect(none.status).toBe(400)
    const five = await fetch(`${sim.url}/2/users/compliance/stream?partition=5`, { headers: auth })
    expect(five.status).toBe(400)
    expect(JSON.stringify(await five.json())).toMatch(/partition/)
  })

  it('send each event on its partition only, in X’s shapes, and replay by backfill_minutes and start_time', async () => {
    const from = new Date(Date.now() - 1_000).toISOString()
    const events = [
      sim.compliance.withdrawals.deletePost(posts()[0]!.id),
      sim.compliance.withdrawals.deletePost(posts()[1]!.id),
      sim.compliance.withdrawals.deletePost(posts()[2]!.id),
      sim.compliance.withdrawals.apply({
        kind: 'tweet',
        id: posts()[3]!.id,
        authorId: posts()[3]!.authorId,
        action: 'withheld',
        withheldInCountries: ['DE'],
      }),
    ]
    const user = sim.world.users[0]!.id
    sim.compliance.withdrawals.apply({ kind: 'user', id: user, action: 'user_suspend' })
    sim.compliance.withdrawals.apply({
      kind: 'user',
      id: user,
      action: 'scrub_geo',
      upToTweetId: posts()[0]!.id,
    })

    const tweetLines: string[] = []
    for (const partition of [1, 2, 3, 4]) {
      const { status, lines } = await readStream(
        `/2/tweets/compliance/stream?partition=${partition}&backfill_minutes=1`,
        250,
      )
      expect(status).toBe(200)
      for (const line of lines) {
        const body = JSON.parse(line) as { data: Record<string, { tweet: { id: string } }> }
        assertXSchema('TweetComplianceStreamResponse', body)
        const id = Object.values(body.data)[0]!.tweet.id
        expect(Number(BigInt(id) % 4n) + 1).toBe(partition)
      }
      tweetLines.push(...lines)
    }
    for (const e of events) expect(tweetLines.join('\n')).toContain(`"id":"${e.id}"`)

    const userPartition = Number(BigInt(user) % 4n) + 1
    const replay = await readStream(
      `/2/users/compliance/stream?partition=${userPartition}&start_time=${from}`,
      250,
    )
    const userLines = replay.lines.map((l) => JSON.parse(l) as unknown)
    for (const body of userLines) assertXSchema('UserComplianceStreamResponse', body)
    expect(userLines).toContainEqual({
      data: { user_suspend: { user: { id: user }, event_at: expect.any(String) } },
    })
    expect(JSON.stringify(userLines)).toContain('scrub_geo')
  })

  it('deliver live events to a connected partition', async () => {
    const post = posts()[10]!
    const partition = Number(BigInt(post.id) % 4n) + 1
    await waitFor('earlier connections closed', () => sim.compliance.stats().streams === 0)
    const reading = readStream(`/2/tweets/compliance/stream?partition=${partition}`, 600)
    await waitFor('the connection', () => sim.compliance.stats().streams > 0)
    sim.compliance.withdrawals.apply({
      kind: 'tweet',
      id: post.id,
      authorId: post.authorId,
      action: 'drop',
    })
    const { lines } = await reading
    expect(lines.map((l) => JSON.parse(l) as unknown)).toEqual([
      {
        data: {
          drop: { tweet: { id: post.id, author_id: post.authorId }, event_at: expect.any(String) },
        },
      },
    ])
  })
})

describe('batch compliance jobs', () => {
  async function create(type: 'tweets' | 'users', expected = 'created') {
    const res = await fetch(`${sim.url}/2/compliance/jobs`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ type, name: 'test' }),
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as {
      data: { id: string; upload_url: string; download_url: string; status: string }
    }
    assertXSchema('CreateComplianceJobResponse', body)
    expect(body.data.status).toBe(expected)
    return body.data
  }

  const status = async (id: string) => {
    const body = (await (
      await fetch(`${sim.url}/2/compliance/jobs/${id}`, { headers: auth })
    ).json()) as {
      data: { status: string }
    }
    assertXSchema('Get2ComplianceJobsIdResponse', body)
    return body.data.status
  }

  it('take the ids by a signed PUT without Authorization and give back a line per withdrawn id', async () => {
    const [kept, deleted, hidden] = posts().slice(20, 23)
    sim.compliance.withdrawals.deletePost(deleted!.id)
    sim.compliance.withdrawals.apply({ kind: 'user', id: hidden!.authorId, action: 'user_protect' })
    const job = await create('tweets')
    const ids = [kept!.id, deleted!.id, hidden!.id].join('\n')

    const withToken = await fetch(job.upload_url, {
      method: 'PUT',
      headers: { ...auth, 'content-type': 'text/plain' },
      body: ids,
    })
    expect(withToken.status).toBe(400)
    expect(await status(job.id)).toBe('created')
    const forged = await fetch(job.upload_url.replace(/token=\w+/, 'token=0000'), {
      method: 'PUT',
      body: ids,
    })
    expect(forged.status).toBe(403)

    const put = await fetch(job.upload_url, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: ids,
    })
    expect(put.status).toBe(200)
    await waitFor('the job complete', async () => (await status(job.id)) === 'complete')
    const results = (await (await fetch(job.download_url)).text())
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            id: string
            action: string
            reason: string
            created_at: string
            redacted_at: string
          },
      )
    expect(results.map((r) => [r.id, r.action, r.reason]).sort()).toEqual(
      [
        [deleted!.id, 'delete', 'deleted'],
        [hidden!.id, 'delete', hidden!.authorId === deleted!.authorId ? 'deleted' : 'protected'],
      ].sort(),
    )
    for (const r of results)
      expect(Date.parse(r.redacted_at)).toBeGreaterThanOrEqual(Date.parse(r.created_at))

    const list = (await (
      await fetch(`${sim.url}/2/compliance/jobs?type=tweets`, { headers: auth })
    ).json()) as unknown
    assertXSchema('Get2ComplianceJobsResponse', list)
    expect(JSON.stringify(list)).toContain(job.id)
    const bad = await fetch(`${sim.url}/2/compliance/jobs?type=likes`, { headers: auth })
    expect(bad.status).toBe(400)
  })

  it('fail or expire on demand', async () => {
    sim.compliance.jobFaults.failNext(1)
    sim.compliance.jobFaults.expireNext(1)
    const expired = await create('users', 'expired')
    expect(await status(expired.id)).toBe('expired')
    const failing = await create('users')
    await fetch(failing.upload_url, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: '1\n',
    })
    await waitFor('the job failed', async () => (await status(failing.id)) === 'failed')
    expect((await fetch(failing.download_url)).status).toBe(404)
  })
})

describe('lookup of a withdrawn Post', () => {
  it('answers X’s error items: not found for a deleted Post, not authorized for a protected author', async () => {
    const [deleted, hidden] = posts().slice(40, 42)
    sim.compliance.withdrawals.deletePost(deleted!.id)
    sim.compliance.withdrawals.apply({ kind: 'user', id: hidden!.authorId, action: 'user_protect' })
    const res = await fetch(`${sim.url}/2/tweets?ids=${deleted!.id},${hidden!.id}`, {
      headers: auth,
    })
    const body = (await res.json()) as {
      data?: unknown
      errors: Array<{ resource_id: string; type: string }>
    }
    assertXSchema('Get2TweetsResponse', body)
    expect(body.data).toBeUndefined()
    const types = Object.fromEntries(body.errors.map((e) => [e.resource_id, e.type]))
    expect(types[deleted!.id]).toBe('https://api.twitter.com/2/problems/resource-not-found')
    if (hidden!.authorId !== deleted!.authorId) {
      expect(types[hidden!.id]).toBe(
        'https://api.twitter.com/2/problems/not-authorized-for-resource',
      )
    }
  })

  it('serves the new text of an edited Post', async () => {
    const post = posts()[50]!
    const before = post.wire.text
    sim.compliance.withdrawals.apply({
      kind: 'tweet',
      id: post.id,
      authorId: post.authorId,
      action: 'tweet_edit',
      initialTweetId: post.id,
      editTweetIds: [post.id],
    })
    const body = (await (
      await fetch(`${sim.url}/2/tweets?ids=${post.id}`, { headers: auth })
    ).json()) as {
      data: Array<{ text: string }>
    }
    expect(body.data[0]!.text).not.toBe(before)
    expect(body.data[0]!.text).toMatch(/\(edited\)$/)
  })
})
