import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { ETwitterStreamEvent, TwitterApi, type ITwitterApiClientPlugin } from 'twitter-api-v2'
import { Client as SdkClient } from 'twitter-api-sdk'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { unpackStored } from '@threadline/redis'
import type { Writer } from '@threadline/writer'
import {
  appWithRules,
  postLine,
  startStreamServer,
  startWriter,
  store,
  waitForStream,
  type StreamServer,
} from './harness.js'

/**
 * The npm X clients, unmodified, read Threadline's filtered stream: each receives exactly the
 * matching Posts with their matching_rules, fields and includes.
 */
let env: TestEnv
let api: StreamServer
let writer: Writer
const dana = { id: '3001', username: 'dana_s', name: 'Dana' }
const eve = { id: '3002', username: 'eve_s', name: 'Eve' }

beforeAll(async () => {
  env = await createTestEnv()
  api = await startStreamServer(env)
  writer = await startWriter(env)
})
afterAll(() => env?.close())

/** twitter-api-v2 only knows api.x.com: rewrite the prefix (streams have their own hook). */
const rewritePrefix = (to: string): ITwitterApiClientPlugin => ({
  onBeforeRequestConfig({ params }) {
    params.url = params.url.replace(/^https:\/\/api\.(x|twitter)\.com/, to)
  },
  onBeforeStreamRequestConfig({ params }) {
    params.url = params.url.replace(/^https:\/\/api\.(x|twitter)\.com/, to)
  },
})

/** Stores a mix of matching and unmatching Posts; returns what each rule should deliver. */
async function storeMix(tag: string) {
  const root = postLine({ text: `root #${tag}`, author: dana })
  const reply = postLine({
    text: `reply by eve #${tag}`,
    author: eve,
    replyTo: { id: root.id, author: dana },
  })
  const other = postLine({ text: 'unrelated', author: eve })
  await store(env, writer, [root.line, other.line])
  await store(env, writer, [reply.line])
  return { root, reply }
}

describe('twitter-api-v2 searchStream', () => {
  it('receives the matching Posts', async () => {
    const app = await appWithRules(env, 'v2 stream', [{ value: '#v2tag', tag: 'v2' }])
    const client = new TwitterApi(app.token, {
      httpAgent: new http.Agent(),
      plugins: [rewritePrefix(api.url)],
    }).readOnly.v2
    const stream = await client.searchStream({
      'tweet.fields': ['created_at', 'conversation_id'],
      expansions: ['author_id', 'referenced_tweets.id'],
      autoConnect: true,
    })
    env.defer(() => stream.close())
    stream.autoReconnect = false
    const got: Array<{ data: { id: string }; includes?: unknown; matching_rules: unknown }> = []
    stream.on(ETwitterStreamEvent.Data, (t) => got.push(t))
    await waitForStream(api, app.appId)
    const { root, reply } = await storeMix('v2tag')
    await waitFor('two Posts', () => got.length >= 2)
    expect(got.map((t) => t.data.id)).toEqual([root.id, reply.id])
    const rule = app.ruleIds.get('#v2tag')
    expect(got[0]!.matching_rules).toEqual([{ id: rule, tag: 'v2' }])
    expect(got[1]!.data).toMatchObject({
      id: reply.id,
      conversation_id: root.id,
      author_id: eve.id,
      referenced_tweets: [{ type: 'replied_to', id: root.id }],
    })
    expect(got[1]!.includes).toMatchObject({
      users: [{ id: eve.id, username: 'eve_s' }],
      tweets: [{ id: root.id, text: 'root #v2tag' }],
    })
    stream.close()
  })
})

describe('twitter-api-sdk tweets.searchStream', () => {
  it('receives the matching Posts', async () => {
    const app = await appWithRules(env, 'sdk stream', [{ value: '#sdktag' }])
    const client = new SdkClient(app.token, { base_url: api.url })
    const got: Array<{ data?: { id: string }; matching_rules?: unknown; includes?: unknown }> = []
    const reading = (async () => {
      for await (const t of client.tweets.searchStream({
        'tweet.fields': ['author_id'],
        expansions: ['author_id'],
      })) {
        got.push(t as (typeof got)[number])
        if (got.length === 2) break
      }
    })()
    await waitForStream(api, app.appId)
    const { root, reply } = await storeMix('sdktag')
    // The sdk connects in the background: the wait above must be for the open stream (it once took
    // a count, which waitFor accepts at 0, so under load the root was stored before the stream
    // opened and never delivered; see connect-wait.test.ts). A deadline, so that a missing Post
    // fails the test instead of hanging it, saying what the hub and the stored stream held.
    await waitFor('two Posts through the sdk', () => got.length >= 2).catch(async (err: Error) => {
      const entries = await env.redis.xrange(`${env.prefix}:stored`, '-', '+')
      throw new Error(
        `${err.message}; received ${JSON.stringify(got.map((t) => t.data?.id))} of ` +
          `${JSON.stringify([root.id, reply.id])}; hub delivered ${api.stream.hub.delivered}, ` +
          `rules ${api.stream.hub.ruleCount(app.appId)}, stored ids ` +
          JSON.stringify(entries.flatMap(([, f]) => unpackStored(f).map((e) => e.id))),
      )
    })
    await reading
    expect(got.map((t) => t.data?.id)).toEqual([root.id, reply.id])
    expect(got[0]!.matching_rules).toEqual([{ id: app.ruleIds.get('#sdktag'), tag: '' }])
    expect(got[0]!.data).toEqual({ id: root.id, text: 'root #sdktag', author_id: dana.id })
    expect(got[1]!.includes).toEqual({
      users: [{ id: eve.id, name: 'Eve', username: 'eve_s' }],
    })
    // Breaking out of the loop closes the connection: the app's slot is free again.
    await waitFor('the connection closed', () => !api.stream.registry.connections(app.appId).size)
  })
})
