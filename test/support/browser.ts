import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page, Request } from 'playwright-core'
import type { TestEnv } from '@threadline/testing'
import { buildViewer } from '../../packages/viewer/src/build.js'
import { launchChromium } from './chromium.js'

/** Where the browser tests' screenshots land (kept by CI as artifacts, ignored by git). */
export const ARTIFACTS = join(import.meta.dirname, '../../test-results')
/** Deadline of every wait on a page that names none of its own. */
export const UI_TIMEOUT_MS = 15_000

/**
 * The viewer built from the sources as they are now (a bundle left by an earlier build may be
 * stale), and a headless Chromium, closed with the test file's environment.
 */
export async function startViewerBrowser(env: TestEnv): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true })
  await buildViewer()
  const browser = await launchChromium()
  env.defer(() => browser.close())
  return browser
}

/** A new page that records every request it makes and every error its scripts throw. */
export async function watchedPage(
  browser: Browser,
  viewport?: { width: number; height: number },
): Promise<{ page: Page; requests: Request[]; errors: string[] }> {
  const page = await browser.newPage(viewport ? { viewport } : {})
  page.setDefaultTimeout(UI_TIMEOUT_MS)
  const requests: Request[] = []
  const errors: string[] = []
  page.on('request', (r) => requests.push(r))
  page.on('pageerror', (e) => errors.push(String(e)))
  return { page, requests, errors }
}
