import { join } from 'node:path'
import type { Browser } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { createApp } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { withdrawPosts } from '@threadline/testing/api'
import type { Writer } from '@threadline/writer'
import { startApi } from '../support/api.js'
import { ARTIFACTS, startViewerBrowser, watchedPage } from '../support/browser.js'
import { postLine, replyIn, startWriter, store, type UserSpec } from '../stream/harness.js'

/**
 * The viewer with Posts X withdrew (docs/api.md §7), in Debian's Chromium: a deleted Post and a
 * hidden one stay in the tree as placeholders that say so, with their replies below them.
 */

let env: TestEnv
let api: ApiServer
let writer: Writer
let browser: Browser
let token: string

const ann: UserSpec = { id: '4601', username: 'ann_w', name: 'Ann' }
const ben: UserSpec = { id: '4602', username: 'ben_w', name: 'Ben' }

const reply = (text: string, author: UserSpec, parent: { id: string; author: UserSpec }) =>
  replyIn(root.id, { text, author, replyTo: parent })

const root = postLine({ text: 'a thread with withdrawals', author: ann })
const deleted = reply('this text must not reach the page', ben, { id: root.id, author: ann })
const underDeleted = reply('a reply kept below the deleted Post', ann, deleted)
const hidden = reply('a reply X drops', ben, { id: root.id, author: ann })
const underHidden = reply('a reply kept below the hidden Post', ann, hidden)

beforeAll(async () => {
  env = await createTestEnv()
  browser = await startViewerBrowser(env)
  api = await startApi(env, { stream: { connectionScope: 'cluster' } })
  writer = await startWriter(env)
  token = (await createApp(env.db, 'viewer')).bearer_token
  await store(env, writer, [root.line, deleted.line, hidden.line])
  await store(env, writer, [underDeleted.line, underHidden.line])
  await withdrawPosts(
    env.db,
    [
      { id: deleted.id, action: 'delete' },
      { id: hidden.id, action: 'drop' },
    ],
    new Date().toISOString(),
  )
})

afterAll(() => env?.close())

describe('the viewer with withdrawn Posts', () => {
  it('shows "This Post was deleted." and "This Post is unavailable." with their replies kept', async () => {
    const { page, errors } = await watchedPage(browser, { width: 960, height: 900 })
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
