import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp, listRules } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '../server.js'
import { assertXSchema, startTestServer } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string
let appId: string

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token, appId } = await startTestServer(env, { ruleCap: 5 }))
})
afterAll(() => env?.close())

const auth = (t = token) => ({ authorization: `Bearer ${t}` })
const post = (body: unknown, query = '', t = token) =>
  server.app.inject({
    method: 'POST',
    url: `/2/tweets/search/stream/rules${query}`,
    headers: { ...auth(t), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  })
const list = (query = '', t = token) =>
  server.app.inject({
    method: 'GET',
    url: `/2/tweets/search/stream/rules${query}`,
    headers: auth(t),
  })

describe('stream rules', () => {
  it('no rules: meta only', async () => {
    const res = await list()
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('RulesLookupResponse', body)
    expect(body.data).toBeUndefined()
    expect(body.meta.result_count).toBe(0)
    expect(body.meta.sent).toMatch(/\.\d{3}Z$/)
  })

  it('dry_run validates and creates nothing (True in any case)', async () => {
    const res = await post({ add: [{ value: 'cats has:media', tag: 'cats' }] }, '?dry_run=True')
    expect(res.statusCode).toBe(201)
    const body = res.json()
    assertXSchema('AddOrDeleteRulesResponse', body)
    expect(body.meta.summary).toEqual({ created: 1, not_created: 0, valid: 1, invalid: 0 })
    expect(await listRules(env.db, appId)).toHaveLength(0)
  })

  it('adds rules (201), reports duplicates and invalid values', async () => {
    const res = await post({
      add: [{ value: 'cats has:media', tag: 'cats' }, { value: 'dogs' }, { value: 'AND' }],
    })
    expect(res.statusCode).toBe(201)
    const body = res.json()
    assertXSchema('AddOrDeleteRulesResponse', body)
    expect(body.data).toHaveLength(2)
    expect(body.data[0]).toMatchObject({
      value: 'cats has:media',
      tag: 'cats',
      id: expect.stringMatching(/^\d+$/),
    })
    expect(body.data[1].tag).toBeUndefined()
    expect(body.meta.summary).toEqual({ created: 2, not_created: 1, valid: 2, invalid: 1 })
    expect(body.errors).toHaveLength(1)
    expect(body.errors[0]).toMatchObject({
      value: 'AND',
      title: 'UnprocessableEntity',
      type: 'https://api.twitter.com/2/problems/invalid-rules',
    })
    expect(body.errors[0].details[0]).toMatch(/\(at position \d+\)$/)

    const again = await post({ add: [{ value: 'dogs' }] })
    expect(again.statusCode).toBe(200)
    const dup = again.json()
    assertXSchema('AddOrDeleteRulesResponse', dup)
    expect(dup.errors[0]).toEqual({
      value: 'dogs',
      id: body.data[1].id,
      title: 'DuplicateRule',
      type: 'https://api.twitter.com/2/problems/duplicate-rules',
    })
    expect(dup.meta.summary.created).toBe(0)
  })

  it('lists rules with pagination and by ids', async () => {
    const all = (await list()).json()
    assertXSchema('RulesLookupResponse', all)
    expect(all.meta.result_count).toBe(2)
    const first = (await list('?max_results=1')).json()
    expect(first.data).toHaveLength(1)
    expect(first.meta.next_token).toBeDefined()
    const second = (await list(`?max_results=1&pagination_token=${first.meta.next_token}`)).json()
    expect(second.data[0].id).toBe(all.data[1].id)
    expect(second.meta.next_token).toBeUndefined()
    const one = (await list(`?ids=${all.data[0].id}`)).json()
    expect(one.data).toEqual([all.data[0]])
    const bad = await list('?pagination_token=forged')
    expect(bad.statusCode).toBe(400)
  })

  it('an app never sees another app’s rules', async () => {
    const other = await createApp(env.db, 'other')
    const body = (await list('', other.bearer_token)).json()
    expect(body.meta.result_count).toBe(0)
    const del = (
      await post(
        { delete: { ids: [(await listRules(env.db, appId))[0]!.id] } },
        '',
        other.bearer_token,
      )
    ).json()
    expect(del.meta.summary).toEqual({ deleted: 0, not_deleted: 1 })
    expect(await listRules(env.db, appId)).toHaveLength(2)
  })

  it('refuses more rules than the cap, creating nothing', async () => {
    const res = await post({ add: ['alpha', 'beta', 'gamma', 'delta'].map((value) => ({ value })) })
    expect(res.statusCode).toBe(400)
    expect(res.json()).toMatchObject({ type: 'https://api.twitter.com/2/problems/rule-cap' })
    expect(await listRules(env.db, appId)).toHaveLength(2)
  })

  it('deletes by id and by value, with errors for ids it does not have', async () => {
    const rules = await listRules(env.db, appId)
    const res = await post({ delete: { ids: [rules[0]!.id, '42'] } })
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('AddOrDeleteRulesResponse', body)
    expect(body.meta.summary).toEqual({ deleted: 1, not_deleted: 1 })
    expect(body.errors).toHaveLength(1)
    expect(body.errors[0].value).toBe('42')
    const byValue = (await post({ delete: { values: [rules[1]!.value] } }, '?dry_run=true')).json()
    expect(byValue.meta.summary).toEqual({ deleted: 1, not_deleted: 0 })
    expect(await listRules(env.db, appId)).toHaveLength(1)
    const all = (await post({ delete: {} }, '?delete_all=true')).json()
    expect(all.meta.summary.deleted).toBe(1)
    expect(await listRules(env.db, appId)).toHaveLength(0)
  })

  it('400s for bodies: content type, JSON, shape', async () => {
    const wrongType = await server.app.inject({
      method: 'POST',
      url: '/2/tweets/search/stream/rules',
      headers: { ...auth(), 'content-type': 'text/plain' },
      payload: '{"add":[{"value":"x"}]}',
    })
    expect(wrongType.statusCode).toBe(400)
    expect(wrongType.json().errors[0].message).toBe(
      'Requests with bodies must have content-type of application/json.',
    )
    const notJson = await server.app.inject({
      method: 'POST',
      url: '/2/tweets/search/stream/rules',
      headers: { ...auth(), 'content-type': 'application/json' },
      payload: '{"add":',
    })
    expect(notJson.statusCode).toBe(400)
    expect(notJson.json().title).toBe('Invalid Request')
    for (const body of [
      {},
      { add: [], delete: { ids: ['1'] } },
      { add: 'x' },
      { delete: { ids: ['x'] } },
      [1],
    ]) {
      const res = await post(body)
      expect(res.statusCode).toBe(400)
      expect(res.json().type).toBe('https://api.twitter.com/2/problems/invalid-request')
    }
    const badBool = await post({ add: [{ value: 'x' }] }, '?dry_run=maybe')
    expect(badBool.json().errors[0].message).toBe(
      'The `dry_run` query parameter value [maybe] is not one of [true,false]',
    )
  })

  it('413 for a body over the limit', async () => {
    const res = await server.app.inject({
      method: 'POST',
      url: '/2/tweets/search/stream/rules',
      headers: { ...auth(), 'content-type': 'application/json' },
      payload: JSON.stringify({ add: [{ value: 'x'.repeat(1_100_000) }] }),
    })
    expect(res.statusCode).toBe(413)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(res.json().status).toBe(413)
  })
})
