import { execFile, spawnSync } from 'node:child_process'
import http from 'node:http'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TwitterApi, type ITwitterApiClientPlugin } from 'twitter-api-v2'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import { startTestServer, storeLines, withdrawPosts } from '@threadline/testing/api'

/**
 * X's batch compliance calls of the clients Threadline's users already have, unmodified, against
 * Threadline (docs/api.md §8.1): twitter-api-v2's sendComplianceJob / complianceJobResult and
 * tweepy's create_compliance_job / get_compliance_job, each uploading to and downloading from
 * the job's signed URLs without a token.
 */
const PYTHON = '/usr/bin/python3'
const DRIVER = fileURLToPath(new URL('./tweepy_compliance.py', import.meta.url))
const hasTweepy = spawnSync(PYTHON, ['-c', 'import tweepy'], { stdio: 'ignore' }).status === 0
const MISSING = `${PYTHON} cannot import tweepy: install it with \`apt-get install python3-tweepy\``
if (!hasTweepy && /^(true|1)$/i.test(process.env.CI ?? '')) throw new Error(`CI: ${MISSING}`)

let env: TestEnv
let base: string
let token: string
const conv = generateConversation({ size: 24, seed: 48, startMs: Date.now() - 3_600_000 })
const deleted = conv.ids.filter((_, i) => i % 4 === 1)
const asked = [...conv.ids.slice(0, 12), '1234567890123456789']
const expected = deleted.filter((id) => asked.includes(id)).sort()

beforeAll(async () => {
  env = await createTestEnv()
  ;({ url: base, token } = await startTestServer(env, {}, { listen: true }))
  await storeLines(env.db, conv.lines)
  await withdrawPosts(
    env.db,
    deleted.map((id) => ({ id, action: 'delete' })),
    new Date(Date.now() - 60_000).toISOString(),
  )
})
afterAll(() => env?.close())

/** twitter-api-v2 only knows api.x.com: rewrite the prefix before each request. */
const rewritePrefix = (to: string): ITwitterApiClientPlugin => ({
  onBeforeRequestConfig({ params }) {
    params.url = params.url.replace(/^https:\/\/api\.(x|twitter)\.com/, to)
  },
})

describe('twitter-api-v2', () => {
  it('sends a job, waits for it and reads its result', async () => {
    const client = new TwitterApi(token, {
      httpAgent: new http.Agent(),
      plugins: [rewritePrefix(base)],
    }).v2
    const job = await client.sendComplianceJob({ type: 'tweets', name: 'v2', ids: asked })
    expect(job.data.status).toBe('created')
    const result = await client.complianceJobResult(job.data)
    expect(result.map((r) => r.id).sort()).toEqual(expected)
    for (const line of result) {
      expect(line).toMatchObject({ action: 'delete', reason: 'deleted' })
      expect(Date.parse(line.created_at)).toBeLessThan(Date.parse(line.redacted_at!))
    }
    const listed = await client.complianceJobs({ type: 'tweets', status: 'complete' })
    expect(listed.data.map((j) => j.id)).toContain(job.data.id)
    expect((await client.complianceJob(job.data.id)).data.status).toBe('complete')
  })
})

describe.skipIf(!hasTweepy)(
  `tweepy, through the README’s transport adapter${hasTweepy ? '' : ` (skipped: ${MISSING})`}`,
  () => {
    it('creates a job, uploads, polls and downloads its result', async () => {
      // Not spawnSync: the API answering tweepy runs on this process's event loop.
      const run = await promisify(execFile)(PYTHON, [DRIVER, asked.join(',')], {
        env: { ...process.env, THREADLINE_URL: base, THREADLINE_TOKEN: token },
        timeout: 90_000,
      })
      expect(run.stderr).toBe('')
      const got = JSON.parse(run.stdout) as {
        created: string
        status: string
        lines: Array<{ id: string; action: string; reason: string }>
        listed: string[]
        id: string
      }
      expect(got.created).toBe('created')
      expect(got.status).toBe('complete')
      expect(got.lines.map((l) => l.id).sort()).toEqual(expected)
      expect(got.lines.every((l) => l.action === 'delete' && l.reason === 'deleted')).toBe(true)
      expect(got.listed).toContain(got.id)
    })
  },
)
