import { execFile, spawn, spawnSync } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareIds } from '@threadline/domain'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import type { Writer } from '@threadline/writer'
import {
  appWithRules,
  postLine,
  startStreamServer,
  startWriter,
  store,
  waitForStream,
  type StreamServer,
} from '../stream/harness.js'

/**
 * Python's tweepy (Debian's python3-tweepy), pointed at Threadline with exactly the lines the README
 * shows (tweepy_driver.py runs them): lookup, search with pagination, counts, rules, and a Post read
 * from the filtered stream.
 */
const PYTHON = '/usr/bin/python3'
const DRIVER = fileURLToPath(new URL('./tweepy_driver.py', import.meta.url))
const hasTweepy = spawnSync(PYTHON, ['-c', 'import tweepy'], { stdio: 'ignore' }).status === 0
const MISSING = `${PYTHON} cannot import tweepy: install it with \`apt-get install python3-tweepy\``
// It runs wherever tweepy imports. CI installs it, so there its absence fails the run (CI=true or 1,
// as CI services set it; CI=false does not count); elsewhere the skipped suite's name says why.
if (!hasTweepy && /^(true|1)$/i.test(process.env.CI ?? '')) throw new Error(`CI: ${MISSING}`)

let env: TestEnv
let api: StreamServer
let writer: Writer
const thread = generateConversation({ size: 25, seed: 7, startMs: Date.now() - 3_600_000 })

beforeAll(async () => {
  if (!hasTweepy) return
  env = await createTestEnv()
  api = await startStreamServer(env)
  writer = await startWriter(env)
  await store(env, writer, thread.lines)
})
afterAll(() => env?.close())

function driverEnv(token: string): NodeJS.ProcessEnv {
  return { ...process.env, THREADLINE_URL: api.url, THREADLINE_TOKEN: token }
}

describe.skipIf(!hasTweepy)(
  `tweepy, through the README’s transport adapter${hasTweepy ? '' : ` (skipped: ${MISSING})`}`,
  () => {
    it('looks up, searches every page, counts and manages rules', async () => {
      const { token } = await appWithRules(env, 'tweepy-rest', [])
      const query = `conversation_id:${thread.rootId}`
      // Not spawnSync: the API answering tweepy runs on this process's event loop.
      const run = await promisify(execFile)(
        PYTHON,
        [DRIVER, 'rest', query, thread.ids.slice(0, 3).join(',')],
        { env: driverEnv(token), timeout: 60_000 },
      )
      expect(run.stderr).toBe('')
      const got = JSON.parse(run.stdout) as {
        lookup: Array<{ id: string; conversation_id: string }>
        search: string[]
        count: number
        rules: string[]
      }
      expect(got.lookup).toEqual(
        thread.ids.slice(0, 3).map((id) => ({ id, conversation_id: thread.rootId })),
      )
      expect(got.search).toEqual([...thread.ids].sort(compareIds).reverse())
      expect(got.count).toBe(thread.ids.length)
      expect(got.rules).toEqual(['from:tweepy_user'])
    })

    it('reads a Post from the filtered stream', async () => {
      const app = await appWithRules(env, 'tweepy-stream', [{ value: '#tweepy', tag: 'py' }])
      const child = spawn(PYTHON, [DRIVER, 'stream'], { env: driverEnv(app.token) })
      let stderr = ''
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
      const exited = new Promise<number | null>((resolve) => child.on('exit', resolve))
      const lines: unknown[] = []
      createInterface({ input: child.stdout }).on('line', (line) => lines.push(JSON.parse(line)))
      try {
        await waitFor('tweepy connected', () => lines.includes('connected'))
        await waitForStream(api, app.appId)
        const post = postLine({
          text: 'hello from #tweepy',
          author: { id: '4001', username: 'pyuser' },
        })
        await store(env, writer, [post.line])
        expect(await exited).toBe(0)
        expect(lines.at(-1)).toEqual({
          id: post.id,
          text: 'hello from #tweepy',
          rules: ['py'],
          users: ['pyuser'],
        })
      } finally {
        child.kill()
      }
      // tweepy logs its own disconnect; anything else (a warning, a traceback) is a failure.
      expect(stderr.trim()).toBe('Stream connection closed by Twitter')
    })
  },
)
