import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { chromium, type Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  apiDepsFromConfig,
  apiOptionsFromConfig,
  createApi,
  withApiOverrides,
  type ApiServer,
} from '@threadline/api'
import { applyComplianceEvents, createApp } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { buildViewer } from '../../packages/viewer/src/build.js'
import type { Writer } from '@threadline/writer'
import { postLine, startWriter, store, type UserSpec } from '../stream/harness.js'

/**
 * The viewer with Posts X withdrew (docs/api.md §7), in Debian's Chromium: a deleted Post and a
 * hidden one stay in the tree as placeholders that say so, with their replies below them.
 */

const ARTIFACTS = join(import.meta.dirname, '../../test-results')
const UI_TIMEOUT_MS = 15_000

let env: TestEnv
let api: ApiServer
let writer: Writer
let browser: Browser
let token: string

const ann: UserSpec = { id: '4601', username: 'ann_w', name: 'Ann' }
const ben: UserSpec = { id: '4602', username: 'ben_w', name: 'Ben' }

function reply(text: string, author: UserSpec, parent: { id: string; author: UserSpec }) {
  const p = postLine({ text, author, replyTo: parent })
  const parsed = JSON.parse(p.line) as { data: Record<string, unknown> }
  parsed.data.conversation_id = root.id
  return { id: p.id, author, line: JSON.stringify(parsed) }
}

const root = postLine({ text: 'a thread with withdrawals', author: ann })
const deleted = reply('this text must not reach the page', ben, { id: root.id, author: ann })
const underDeleted = reply('a reply kept below the deleted Post', ann, deleted)
const hidden = reply('a reply X drops', ben, { id: root.id, author: ann })
const underHidden = reply('a reply kept below the hidden Post', ann, hidden)

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true })
  await buildViewer()
  env = await createTestEnv()
  api = createApi(
    await apiDepsFromConfig(env.config, env.logger),
    withApiOverrides(apiOptionsFromConfig(env.config), {
      server: { host: '127.0.0.1', port: 0 },
      stream: { connectionScope: 'cluster' },
    }),
  )
  env.defer(() => api.close())
  await api.start()
  writer = await startWriter(env)
  token = (await createApp(env.db, 'viewer')).bearer_token
  await store(env, writer, [root.line, deleted.line, hidden.line])
  await store(env, writer, [underDeleted.line, underHidden.line])
  const now = new Date().toISOString()
  await applyComplianceEvents(env.db, [
    {
      kind: 'tweet',
      id: deleted.id,
      action: 'delete',
      eventAt: now,
      receivedAt: now,
      source: 'stream',
    },
    {
      kind: 'tweet',
      id: hidden.id,
      action: 'drop',
      eventAt: now,
      receivedAt: now,
      source: 'stream',
    },
  ])
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  })
})

afterAll(async () => {
  await browser?.close()
  await env?.close()
})

describe('the viewer with withdrawn Posts', () => {
  it('shows "This Post was deleted." and "This Post is unavailable." with their replies kept', async () => {
    const page = await browser.newPage({ viewport: { width: 960, height: 900 } })
    page.setDefaultTimeout(UI_TIMEOUT_MS)
    const errors: string[] = []
    page.on('pageerror', (e) => errors.push(String(e)))
    await page.goto(`${api.url()}/threads/${root.id}#token=${token}`)
    await page.waitForSelector(`[data-post-id="${underHidden.id}"]`)

    const gone = page.locator(`[data-post-id="${deleted.id}"]`)
    await expect(gone.getAttribute('data-withdrawn')).resolves.toBe('deleted')
    await expect(gone.locator('.withdrawn-text').textContent()).resolves.toBe(
      'This Post was deleted.',
    )
    const unavailable = page.locator(`[data-post-id="${hidden.id}"]`)
    await expect(unavailable.getAttribute('data-withdrawn')).resolves.toBe('unavailable')
    await expect(unavailable.locator('.withdrawn-text').textContent()).resolves.toBe(
      'This Post is unavailable.',
    )
    // The replies stay, one level below the placeholders.
    for (const [id, depth] of [
      [deleted.id, '1'],
      [underDeleted.id, '2'],
      [hidden.id, '1'],
      [underHidden.id, '2'],
    ]) {
      await expect(page.locator(`[data-post-id="${id}"]`).getAttribute('data-depth')).resolves.toBe(
        depth,
      )
    }
    await expect(page.isVisible(`[data-post-id="${underDeleted.id}"]`)).resolves.toBe(true)
    const body = (await page.textContent('body')) ?? ''
    expect(body).not.toContain('this text must not reach the page')
    expect(body).not.toContain('a reply X drops')
    expect(body).toContain('a reply kept below the deleted Post')

    await page.screenshot({ path: join(ARTIFACTS, 'viewer-withdrawn.png'), fullPage: true })
    expect(errors).toEqual([])
    await page.close()
  })
})
