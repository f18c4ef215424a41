import type { ChildProcess } from 'node:child_process'
import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from '@threadline/db'
import {
  createTestEnv,
  generateConversation,
  waitFor,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { startTestServer, storeLines, withdrawPosts } from '@threadline/testing/api'
import { forkApi } from '../support/api.js'

/**
 * docs/api.md §8.1: a job must not stay in progress when the API process working it stops. An
 * API in its own process is killed (SIGKILL: no shutdown code runs) mid-upload and mid-check;
 * another instance, reading the job once the lease lapsed, fails the first and resumes the second.
 */
const SECRET = 'job-recovery-secret'
const LEASE_MS = 1_500

let env: TestEnv
let base: string
let token: string
const conv = generateConversation({ size: 30, seed: 47 })
const deleted = conv.ids.filter((_, i) => i % 3 === 0)

beforeAll(async () => {
  env = await createTestEnv({ API_TOKEN_SECRET: SECRET })
  ;({ token, url: base } = await startTestServer(
    env,
    { tokenSecret: SECRET, compliance: { leaseMs: LEASE_MS } },
    { listen: true },
  ))
  await storeLines(env.db, conv.lines)
  await withdrawPosts(
    env.db,
    deleted.map((id) => ({ id, action: 'delete' })),
    '2026-11-28T10:00:00.000Z',
  )
})
afterAll(() => env?.close())

/** An API process with tiny chunks, so that its check takes long enough to be interrupted. */
const startChild = () =>
  forkApi(env, (child) => child.kill('SIGKILL'), {
    options: { overrides: { compliance: { leaseMs: LEASE_MS, chunkIds: 200 } } },
  })

const call = async (url: string, method = 'GET', body?: unknown) => {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  return (await res.json()) as { data: Record<string, string> }
}

const jobRow = async (id: string) =>
  (
    await sql<{ status: string; checked_chunks: number; uploaded_at: Date | null }>`
      SELECT status, checked_chunks, uploaded_at FROM compliance_jobs WHERE id = ${id}`.execute(
      env.db,
    )
  ).rows[0]!

const killed = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGKILL')
  })

describe('a job whose API process stops', () => {
  it('fails when the upload was not received whole', async () => {
    const { child, url } = await startChild()
    const job = (await call(`${url}/2/compliance/jobs`, 'POST', { type: 'tweets' })).data
    const req = http.request(job.upload_url!, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain', 'content-length': '10000000' },
    })
    req.on('error', () => {})
    req.write(`${conv.ids.join('\n')}\n`)
    await waitFor(
      'the upload to start',
      async () => (await jobRow(job.id!)).status === 'in_progress' || 'not yet',
    )
    await killed(child)
    req.destroy()

    const failed = await waitForValue('the job to fail', async () => {
      const got = (await call(`${base}/2/compliance/jobs/${job.id}`)).data
      return got.status === 'failed' ? got : undefined
    })
    expect(failed.error).toMatch(/upload was interrupted/)
  })

  it('is resumed by another instance when its check was interrupted, with the same result', async () => {
    const { child, url } = await startChild()
    const job = (await call(`${url}/2/compliance/jobs`, 'POST', { type: 'tweets' })).data
    // Many unknown ids around the stored ones: 500 chunks of 200.
    const ids = [...conv.ids]
    for (let i = 0; ids.length < 100_000; i++) ids.push(String(10_000_000_000n + BigInt(i)))
    const res = await fetch(job.upload_url!, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body: `${ids.join('\n')}\n`,
    })
    expect(res.status).toBe(200)
    await waitFor(
      'the check to be under way',
      async () => {
        const row = await jobRow(job.id!)
        if (row.status !== 'in_progress') return `status ${row.status}`
        return row.checked_chunks > 0 || 'no chunk checked yet'
      },
      { intervalMs: 10 },
    )
    await killed(child)
    const at = await jobRow(job.id!)
    expect(at.status).toBe('in_progress')
    expect(at.checked_chunks).toBeLessThan(500)

    const done = await waitForValue(
      'the job to be resumed and complete',
      async () => {
        const got = (await call(`${base}/2/compliance/jobs/${job.id}`)).data
        return got.status === 'complete' ? got : undefined
      },
      { timeoutMs: 60_000, intervalMs: 200 },
    )
    const lines = (await (await fetch(done.download_url!)).text()).trim().split('\n')
    expect(lines.map((l) => (JSON.parse(l) as { id: string }).id).sort()).toEqual(
      [...deleted].sort(),
    )
  })
})
