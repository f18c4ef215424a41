import { join } from 'node:path'
import type { Browser, Page, Request } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import type { Writer } from '@threadline/writer'
import { startApi } from '../support/api.js'
import { ARTIFACTS, startViewerBrowser, watchedPage } from '../support/browser.js'
import {
  appWithRules,
  postLine,
  replyIn,
  startWriter,
  store,
  type UserSpec,
} from '../stream/harness.js'

/**
 * The conversation viewer (docs/api.md §6) in a real browser, Debian's Chromium driven by
 * playwright-core, against the API as production builds it and Posts stored by the real writer.
 * Screenshots land in test-results/ (kept by CI as artifacts, ignored by git).
 */

/** The bound: a reply stored while the page is open shows within a second. */
const LIVE_DEADLINE_MS = 1_000

let env: TestEnv
let api: ApiServer
let writer: Writer
let browser: Browser
let token: string

const alice: UserSpec = { id: '4001', username: 'alice_v', name: 'Alice Liddell' }
const bob: UserSpec = { id: '4002', username: 'bob_v', name: 'بوب' }
const carol: UserSpec = { id: '4003', username: 'carol_v', name: 'Carol 😀' }

/** A reply in `conversationId`. */
const reply = (
  conversationId: string,
  text: string,
  author: UserSpec,
  parent: { id: string; author: UserSpec },
) => replyIn(conversationId, { text, author, replyTo: parent })

/** The stored conversation: a branch three deep, a sibling, and an orphan with its own reply. */
const root = postLine({
  text: 'Who reads whole threads? 𝒜𝓈𝓉𝓇𝒶𝓁 text 😀',
  author: alice,
  // X counts 8 replies; 6 are stored (one of them an orphan), so the coverage line has a gap to show.
  extra: { public_metrics: { reply_count: 8, retweet_count: 4, like_count: 21, quote_count: 1 } },
})
const rootRef = { id: root.id, author: alice }
const r1 = reply(root.id, 'مرحبا — a reply that starts right to left', bob, rootRef)
const r1a = reply(root.id, 'the first author answers', alice, r1)
const r1a1 = reply(root.id, 'and a third level', carol, r1a)
const r2 = reply(root.id, 'a second reply to the root', carol, rootRef)
/** A parent that is never stored (older than the root: no id made later can take it). */
const missing = { id: String(BigInt(root.id) - 1000n), author: bob }
const orphan = reply(root.id, 'an orphan: its parent was not collected', carol, missing)
const orphanReply = reply(root.id, 'a reply to the orphan', alice, orphan)
const expectedDepth = new Map([
  [root.id, 0],
  [r1.id, 1],
  [r1a.id, 2],
  [r1a1.id, 3],
  [r2.id, 1],
  [orphan.id, 1],
  [orphanReply.id, 2],
])

beforeAll(async () => {
  env = await createTestEnv()
  browser = await startViewerBrowser(env)
  api = await startApi(env, { stream: { connectionScope: 'cluster' } })
  writer = await startWriter(env)
  ;({ token } = await appWithRules(env, 'viewer', [{ value: `conversation_id:${root.id}` }]))
  await store(env, writer, [root.line, r1.line, r1a.line, r1a1.line, r2.line])
  await store(env, writer, [orphan.line, orphanReply.line])
})

afterAll(() => env?.close())

/** A page at `path` with the token, recording its requests for the origin and token checks. */
async function openPage(width: number, height: number, path: string) {
  const watched = await watchedPage(browser, { width, height })
  await watched.page.goto(`${api.url()}${path}#token=${token}`)
  return watched
}

/** Every request stayed on the API's origin and carried the token in its header only. */
function checkRequests(requests: Request[]) {
  const origin = new URL(api.url()).origin
  expect(requests.length).toBeGreaterThan(0)
  for (const r of requests) {
    expect(r.url()).not.toContain(token)
    expect(r.url()).not.toContain(encodeURIComponent(token))
    expect(new URL(r.url()).origin).toBe(origin)
  }
  const dataCalls = requests.filter((r) => new URL(r.url()).pathname.startsWith('/2/'))
  expect(dataCalls.length).toBeGreaterThan(0)
  for (const r of dataCalls) expect(r.headers().authorization).toBe(`Bearer ${token}`)
}

const depths = (page: Page) =>
  page.$$eval('[data-post-id]', (els) =>
    els.map((el): [string, number] => [
      el.getAttribute('data-post-id')!,
      Number(el.getAttribute('data-depth')),
    ]),
  )

const visible = (page: Page, id: string) => page.isVisible(`[data-post-id="${id}"]`)

describe('the conversation viewer', () => {
  it('shows every stored Post at its depth, orphans under a placeholder, and collapses', async () => {
    const { page, requests, errors } = await openPage(960, 900, `/threads/${root.id}`)
    await page.waitForSelector(`[data-post-id="${orphanReply.id}"]`)
    expect(new Map(await depths(page))).toEqual(expectedDepth)
    // The fragment is gone from the address once read.
    expect(page.url()).not.toContain(token)

    const placeholder = page.locator(`[data-missing-id="${missing.id}"]`)
    await expect(placeholder.count()).resolves.toBe(1)
    await expect(
      placeholder.locator(`[data-post-id="${orphan.id}"]`).count(),
      'the orphan sits under its placeholder',
    ).resolves.toBe(1)
    const coverage = await page.locator('#coverage').textContent()
    expect(coverage).toContain('7 of 9 Posts collected')
    expect(coverage).toContain('1 parent not collected')
    // The header's metrics (docs/api.md §5.5), read from the metrics endpoint.
    await page.locator('#metrics dt').first().waitFor({ timeout: 10_000 })
    expect(await page.locator('#metrics dt').allTextContents()).toEqual(
      expect.arrayContaining(['Depth', 'Breadth', 'Virality', 'h-index']),
    )
    await expect(
      page.locator(`[data-post-id="${r1a.id}"].op`).count(),
      'the root author marked',
    ).resolves.toBe(1)

    const toggle = page.locator(`[data-post-id="${r1.id}"] > .head > .toggle`)
    await toggle.click()
    await expect(toggle.textContent()).resolves.toContain('2 hidden')
    expect(await visible(page, r1a.id)).toBe(false)
    expect(await visible(page, r1a1.id)).toBe(false)
    expect(await visible(page, r2.id)).toBe(true)
    // Restored from the keyboard.
    await toggle.focus()
    await page.keyboard.press('Enter')
    expect(await visible(page, r1a.id)).toBe(true)
    expect(await visible(page, r1a1.id)).toBe(true)

    await page.screenshot({ path: join(ARTIFACTS, 'viewer-wide.png'), fullPage: true })
    expect(errors).toEqual([])
    checkRequests(requests)
    await page.close()
  })

  it('shows a reply stored while it is open within a second, without moving the view', async () => {
    const { page, requests, errors } = await openPage(1100, 300, `/threads/${root.id}`)
    await page.waitForSelector(`[data-post-id="${orphanReply.id}"]`)
    await page.waitForSelector('body[data-live="live"]')
    await expect(page.locator('.post.new').count(), 'stored Posts are not new').resolves.toBe(0)
    // The reader looks at the second reply; the new one lands above it.
    await page.locator(`[data-post-id="${r2.id}"]`).evaluate((el) => el.scrollIntoView())
    const before = await page
      .locator(`[data-post-id="${r2.id}"]`)
      .evaluate((el) => el.getBoundingClientRect().top)

    const live = reply(root.id, 'a reply while the page is open', bob, r1a1)
    await store(env, writer, [live.line])
    await page.waitForSelector(`[data-post-id="${live.id}"].new`, { timeout: LIVE_DEADLINE_MS })

    expect(new Map(await depths(page)).get(live.id)).toBe(4)
    const after = await page
      .locator(`[data-post-id="${r2.id}"]`)
      .evaluate((el) => el.getBoundingClientRect().top)
    expect(Math.abs(after - before)).toBeLessThanOrEqual(1)
    expect(errors).toEqual([])
    checkRequests(requests)
    await page.close()
  })

  it('reconnects after a drop, asking for the minutes it missed', async () => {
    const { page } = await watchedPage(browser)
    const feeds: string[] = []
    // The first connection fails as a dropped network would; later ones go through.
    await page.route('**/stream?**', async (route) => {
      feeds.push(route.request().url())
      if (feeds.length === 1) await route.abort('connectionreset')
      else await route.continue()
    })
    await page.goto(`${api.url()}/threads/${root.id}#token=${token}`)
    await page.waitForSelector(`[data-post-id="${orphanReply.id}"]`)
    await page.waitForSelector('body[data-live="live"]')
    expect(new URL(feeds[0]!).searchParams.has('backfill_minutes')).toBe(false)
    expect(new URL(feeds.at(-1)!).searchParams.get('backfill_minutes')).toBe('1')
    const after = reply(root.id, 'a reply after the reconnection', carol, r2)
    await store(env, writer, [after.line])
    await page.waitForSelector(`[data-post-id="${after.id}"].new`)
    await page.close()
  })

  it('is readable 320 px wide', async () => {
    const { page, requests, errors } = await openPage(320, 720, `/threads/${root.id}`)
    await page.waitForSelector(`[data-post-id="${orphanReply.id}"]`)
    const overflow = await page.evaluate<number>(
      'document.documentElement.scrollWidth - document.documentElement.clientWidth',
    )
    expect(overflow).toBeLessThanOrEqual(0)
    await page.screenshot({ path: join(ARTIFACTS, 'viewer-narrow.png'), fullPage: true })
    expect(errors).toEqual([])
    checkRequests(requests)
    await page.close()
  })

  it('reads a large tree page by page as the reader scrolls', async () => {
    const big = postLine({ text: 'a busy thread', author: alice })
    const replies = Array.from({ length: 450 }, (_, i) =>
      reply(big.id, `reply ${i}`, i % 2 ? bob : carol, { id: big.id, author: alice }),
    )
    await store(env, writer, [big.line, ...replies.map((r) => r.line)])
    const { page, requests, errors } = await openPage(1100, 800, `/threads/${big.id}`)
    await page.waitForSelector(`[data-post-id="${big.id}"]`)
    const shown = () => page.locator('[data-post-id]').count()
    // One page of 200 (and the root) fills far more than the window: no more is read yet.
    expect(await shown()).toBeLessThan(451)
    await waitFor('every Post shown after scrolling', async () => {
      await page.mouse.wheel(0, 100_000)
      return (await shown()) === 451
    })
    const pages = requests.filter((r) => new URL(r.url()).pathname === `/2/conversations/${big.id}`)
    expect(pages.length).toBe(3)
    expect(errors).toEqual([])
    checkRequests(requests)
    await page.close()
  })

  it('lists the followed conversations at /threads, linking to their pages', async () => {
    const { page, requests, errors } = await openPage(1100, 700, '/threads')
    const link = page.locator(`[data-conversation-id="${root.id}"] a`)
    await link.click()
    await page.waitForSelector(`[data-post-id="${root.id}"]`)
    // The token was kept for the tab: the next page asked for nothing.
    await waitFor('every Post shown', async () => (await depths(page)).length >= 7)
    expect(errors).toEqual([])
    checkRequests(requests)
    await page.close()
  })

  it('asks for the token when the address has none, and sends it in a header only', async () => {
    const { page, requests } = await watchedPage(browser)
    await page.goto(`${api.url()}/threads/${root.id}`)
    await page.fill('#token', token)
    await page.press('#token', 'Enter')
    await page.waitForSelector(`[data-post-id="${root.id}"]`)
    checkRequests(requests)
    await page.close()
  })

  it('answers a bad id with a 400 and serves the bundle under a same-origin policy', async () => {
    const bad = await fetch(`${api.url()}/threads/abc`)
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { title: string }).title).toBe('Invalid Request')
    const script = await fetch(`${api.url()}/threads/assets/viewer.js`)
    expect(script.status).toBe(200)
    expect(script.headers.get('content-type')).toContain('text/javascript')
    const html = await fetch(`${api.url()}/threads/${root.id}`)
    expect(html.headers.get('content-security-policy')).toContain("default-src 'none'")
    expect(await html.text()).not.toMatch(/https?:\/\//)
  })
})
