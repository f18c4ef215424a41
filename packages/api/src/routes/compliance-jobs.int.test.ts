import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyComplianceEvents, createApp, sql } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import {
  createTestEnv,
  generateConversation,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'

let env: TestEnv
let base: string
let token: string
/** The server's clock: tests move it to pass the URLs' expiry. */
let clockMs = Date.now()
const conv = generateConversation({ size: 20, seed: 45, users: 5 })
const deleted = conv.ids.slice(2, 5)
const UNKNOWN = '1234567890123456789'

const event = (e: Pick<ComplianceEvent, 'id' | 'action'> & Partial<ComplianceEvent>) =>
  ({
    kind: 'tweet',
    eventAt: '2026-11-28T10:00:00.000Z',
    receivedAt: '2026-11-28T10:00:01.000Z',
    source: 'stream',
    ...e,
  }) as ComplianceEvent

beforeAll(async () => {
  env = await createTestEnv()
  ;({ token, url: base } = await startTestServer(
    env,
    { now: () => new Date(clockMs), compliance: { chunkIds: 4, maxIds: 50, leaseMs: 3_000 } },
    { listen: true },
  ))
  await storeLines(env.db, conv.lines)
  await applyComplianceEvents(env.db, [
    ...deleted.map((id) => event({ id, action: 'delete' })),
    event({ kind: 'user', id: '1001', action: 'user_protect' }),
  ])
})
afterAll(() => env?.close())

const api = (method: string, path: string, body?: unknown, bearer = token) =>
  fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${bearer}`,
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })

interface Job {
  id: string
  type: string
  name?: string
  status: string
  error?: string
  upload_url: string
  upload_expires_at: string
  download_url: string
  download_expires_at: string
}

async function createJob(body: unknown = { type: 'tweets', name: 'nightly' }) {
  const res = await api('POST', '/2/compliance/jobs', body)
  expect(res.status).toBe(200)
  const json = (await res.json()) as { data: Job }
  assertXSchema('CreateComplianceJobResponse', json)
  return json.data
}

const jobStatus = async (id: string, want: string) =>
  waitForValue(`job ${id} ${want}`, async () => {
    const json = (await (await api('GET', `/2/compliance/jobs/${id}`)).json()) as { data: Job }
    return json.data.status === want ? json.data : undefined
  })

const upload = (url: string, text: string) =>
  fetch(url, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: text })

describe('a batch compliance job', () => {
  it('lives as X’s: created, uploaded without a token, complete, downloaded', async () => {
    const job = await createJob()
    expect(job).toMatchObject({ type: 'tweets', name: 'nightly', status: 'created' })
    expect(job.upload_url.startsWith(`${base}/2/compliance/jobs/${job.id}/upload?`)).toBe(true)
    expect(Date.parse(job.upload_expires_at) - clockMs).toBe(15 * 60_000)
    expect(Date.parse(job.download_expires_at) - clockMs).toBe(7 * 24 * 3_600_000)

    const author1001 = conv.lines
      .map((l) => JSON.parse(l) as { data: { id: string; author_id: string } })
      .filter((l) => l.data.author_id === '1001')
      .map((l) => l.data.id)
    const visible = conv.ids.filter((id) => !deleted.includes(id) && !author1001.includes(id))
    const ids = [...deleted, ...author1001, ...visible.slice(0, 6), UNKNOWN, deleted[0]!]
    // CRLF line ends, a blank line and spaces are all X's upload format allows.
    const res = await upload(job.upload_url, `${ids.join('\r\n')}\n\n  ${visible[7]}  \n`)
    expect(res.status).toBe(200)

    const done = await jobStatus(job.id, 'complete')
    assertXSchema('Get2ComplianceJobsIdResponse', { data: done })
    const got = await fetch(done.download_url)
    expect(got.status).toBe(200)
    const lines = (await got.text())
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => JSON.parse(l) as Record<string, string>)
    const expected = [...new Set([...deleted, ...author1001])].sort((a, b) =>
      BigInt(a) < BigInt(b) ? -1 : 1,
    )
    expect(lines.map((l) => l.id)).toEqual(expected)
    for (const line of lines) {
      expect(Object.keys(line).sort()).toEqual(
        ['action', 'created_at', 'id', 'reason', 'redacted_at'].sort(),
      )
      expect(line.action).toBe('delete')
      expect(line.reason).toBe(deleted.includes(line.id!) ? 'deleted' : 'protected')
    }

    const listed = await api('GET', '/2/compliance/jobs?type=tweets&status=complete')
    const list = (await listed.json()) as { data: Array<{ id: string }> }
    assertXSchema('Get2ComplianceJobsResponse', list)
    expect(list.data.map((j) => j.id)).toContain(job.id)
    const failed = await (await api('GET', '/2/compliance/jobs?type=tweets&status=failed')).json()
    expect(failed).toEqual({ meta: { result_count: 0 } })
    const fields = await api('GET', `/2/compliance/jobs/${job.id}?compliance_job.fields=status`)
    expect(await fields.json()).toEqual({ data: { id: job.id, status: 'complete' } })
  })

  it('checks user ids against the users', async () => {
    const job = await createJob({ type: 'users' })
    expect((await upload(job.upload_url, '1001\n1002\n')).status).toBe(200)
    const done = await jobStatus(job.id, 'complete')
    const lines = (await (await fetch(done.download_url)).text()).trim().split('\n')
    expect(lines.map((l) => (JSON.parse(l) as { id: string; reason: string }).reason)).toEqual([
      'protected',
    ])
  })

  it('takes an upload whatever its content type, or with none', async () => {
    for (const type of [undefined, 'application/octet-stream']) {
      const job = await createJob()
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request(job.upload_url, {
          method: 'PUT',
          headers: type ? { 'content-type': type } : {},
        })
        req.on('response', (res) => {
          res.resume()
          resolve(res.statusCode ?? 0)
        })
        req.on('error', reject)
        req.end(`${deleted[1]}\n`)
      })
      expect(status).toBe(200)
      const done = await jobStatus(job.id, 'complete')
      expect(await (await fetch(done.download_url)).text()).toContain(deleted[1])
    }
  })

  it('belongs to its app: another app gets X’s not-found and an empty list', async () => {
    const job = await createJob()
    const other = await createApp(env.db, 'other app')
    const res = await api('GET', `/2/compliance/jobs/${job.id}`, undefined, other.bearer_token)
    expect(res.status).toBe(404)
    expect(await res.json()).toMatchObject({
      type: 'https://api.twitter.com/2/problems/resource-not-found',
      detail: `Could not find compliance job with id: [${job.id}].`,
    })
    const list = await api('GET', '/2/compliance/jobs?type=tweets', undefined, other.bearer_token)
    expect(await list.json()).toEqual({ meta: { result_count: 0 } })
  })

  it('refuses a URL whose signature is not its own, and expired URLs with X’s error', async () => {
    const job = await createJob()
    const forged = job.upload_url.replace(/token=[^&]+/, 'token=AAAA.BBBB')
    const bad = await upload(forged, '1\n')
    expect(bad.status).toBe(403)
    expect(await bad.text()).toContain('<Code>SignatureDoesNotMatch</Code>')
    // Another job's token does not open this one.
    const second = await createJob()
    const swapped = job.upload_url.replace(/token=[^&]+/, second.upload_url.split('token=')[1]!)
    expect((await upload(swapped, '1\n')).status).toBe(403)

    clockMs += 16 * 60_000
    try {
      const late = await upload(job.upload_url, `${conv.ids[0]}\n`)
      expect(late.status).toBe(400)
      expect(await late.text()).toMatch(/<Code>ExpiredToken<\/Code>.*signature expired at/)
      const shown = await api('GET', `/2/compliance/jobs/${job.id}`)
      expect(((await shown.json()) as { data: { status: string } }).data.status).toBe('expired')
    } finally {
      clockMs -= 16 * 60_000
    }

    const done = await createJob()
    expect((await upload(done.upload_url, `${deleted[0]}\n`)).status).toBe(200)
    const complete = await jobStatus(done.id, 'complete')
    clockMs += 7 * 24 * 3_600_000 + 1_000
    try {
      const late = await fetch(complete.download_url)
      expect(late.status).toBe(400)
      expect(await late.text()).toContain('<Code>ExpiredToken</Code>')
      const list = await api('GET', '/2/compliance/jobs?type=tweets&status=expired')
      const ids = ((await list.json()) as { data: Array<{ id: string }> }).data.map((j) => j.id)
      expect(ids).toContain(done.id)
      // The next job made drops what no one may download any more.
      const results = () =>
        sql`SELECT 1 FROM compliance_job_results WHERE job_id = ${done.id}`.execute(env.db)
      expect((await results()).rows).toHaveLength(1)
      await createJob()
      expect((await results()).rows).toEqual([])
    } finally {
      clockMs -= 7 * 24 * 3_600_000 + 1_000
    }
  })

  it('fails a bad upload with a reason that names the line, and takes one upload only', async () => {
    const job = await createJob()
    const res = await upload(job.upload_url, `${conv.ids[0]}\n${conv.ids[1]}\nnot-an-id\n`)
    expect(res.status).toBe(400)
    expect(await res.text()).toContain('line 3 of the upload is not an id')
    const failed = await jobStatus(job.id, 'failed')
    expect(failed.error).toMatch(/line 3 of the upload is not an id .*"not-an-id"/)
    assertXSchema('Get2ComplianceJobsIdResponse', { data: failed })
    expect((await upload(job.upload_url, `${conv.ids[0]}\n`)).status).toBe(409)

    const big = await createJob()
    const tooMany = Array.from({ length: 51 }, (_, i) => String(i + 1)).join('\n')
    const refused = await upload(big.upload_url, tooMany)
    expect(refused.status).toBe(413)
    expect((await jobStatus(big.id, 'failed')).error).toBe('the upload holds more than 50 ids')
    const { rows } =
      await sql`SELECT 1 FROM compliance_job_uploads WHERE job_id = ${big.id}`.execute(env.db)
    expect(rows).toEqual([])
  })

  it('fails a job whose upload the client broke off', async () => {
    const job = await createJob()
    const url = new URL(job.upload_url)
    await new Promise<void>((resolve, reject) => {
      const req = http.request(url, {
        method: 'PUT',
        headers: { 'content-type': 'text/plain', 'content-length': '100000' },
      })
      req.on('error', () => resolve())
      req.write(`${conv.ids.slice(0, 10).join('\n')}\n`, () => {
        // Gone before the rest: the server sees the body end early.
        setTimeout(() => req.destroy(), 100)
        resolve()
      })
      req.on('response', () => reject(new Error('the server answered a broken upload')))
    })
    const failed = await jobStatus(job.id, 'failed')
    expect(failed.error).toMatch(/upload was interrupted/)
  })

  it('fails a job whose check was taken over three times (a check that always fails ends)', async () => {
    const job = await createJob()
    await sql`UPDATE compliance_jobs SET status = 'in_progress', uploaded_at = now(),
        staged_chunks = 1, lease_owner = 'stopped', lease_until = now() - interval '1 second',
        takeovers = 3
      WHERE id = ${job.id}`.execute(env.db)
    const failed = await jobStatus(job.id, 'failed')
    expect(failed.error).toMatch(/failed again and again/)
  })

  it('answers X’s 400s for a bad body or parameters', async () => {
    const res = await api('POST', '/2/compliance/jobs', { type: 'likes', colour: 1 })
    expect(res.status).toBe(400)
    const body = (await res.json()) as { errors: Array<{ message: string }> }
    expect(body.errors.map((e) => e.message)).toEqual([
      'The body parameter [colour] is not one of [type,name,resumable]',
      'The `type` body parameter must be one of [tweets,users]',
    ])
    const list = await api('GET', '/2/compliance/jobs')
    expect(list.status).toBe(400)
    expect(await list.json()).toMatchObject({
      errors: [{ message: 'The `type` query parameter can not be empty' }],
    })
    const unauth = await fetch(`${base}/2/compliance/jobs?type=tweets`)
    expect(unauth.status).toBe(401)
  })
})

describe('GET /2/openapi.json', () => {
  it('documents the compliance endpoints, the signed URLs without a bearer token', async () => {
    const doc = (await (await fetch(`${base}/2/openapi.json`)).json()) as {
      paths: Record<string, Record<string, { security: unknown[]; parameters: unknown[] }>>
    }
    for (const [path, method] of [
      ['/2/compliance/jobs', 'get'],
      ['/2/compliance/jobs', 'post'],
      ['/2/compliance/jobs/{id}', 'get'],
      ['/2/tweets/compliance/stream', 'get'],
      ['/2/users/compliance/stream', 'get'],
    ] as const) {
      expect(doc.paths[path]?.[method]?.security, `${method} ${path}`).toEqual([
        { BearerToken: [] },
      ])
    }
    expect(doc.paths['/2/tweets/compliance/stream']!.get!.parameters).toContainEqual(
      expect.objectContaining({ name: 'partition', required: true, in: 'query' }),
    )
    expect(doc.paths['/2/compliance/jobs/{id}/upload']?.put?.security).toEqual([])
    expect(doc.paths['/2/compliance/jobs/{id}/download']?.get?.security).toEqual([])
  })
})
