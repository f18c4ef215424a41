import { describe, expect, it } from 'vitest'
import { loadConfig } from '@threadline/config'
import { silentLogger } from '@threadline/logger'
import { rulesCommand } from './rules.js'
import { webhooksCommand } from './webhooks.js'

// Refused before any connection is made: the database URL points nowhere.
const config = loadConfig({ DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' })

describe('--app', () => {
  it('is required by rules, and says so when missing', async () => {
    await expect(rulesCommand(config, ['list'], {})).rejects.toThrow(/^--app ID is required\n/)
  })

  it('names a malformed value instead of calling it missing', async () => {
    await expect(rulesCommand(config, ['list'], { app: '12x' })).rejects.toThrow(
      /^--app "12x" is not an app id \(1-19 digits\)\nusage: threadline rules/,
    )
    await expect(
      webhooksCommand(config, silentLogger(), ['failures'], { app: '12x' }),
    ).rejects.toThrow(/^--app "12x" is not an app id/)
  })
})
