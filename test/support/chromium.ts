import { existsSync } from 'node:fs'
import { chromium, type Browser } from 'playwright-core'

/** Where the browser tests find Chromium: Debian's package (`.ci/run` installs it). */
const CHROMIUM = '/usr/bin/chromium'

/** A headless Chromium, or an error that says how to get one. */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `the browser tests drive Chromium at ${CHROMIUM}, which is not there: ` +
        'apt-get install -y chromium (.ci/run installs it)',
    )
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu'],
  })
}
