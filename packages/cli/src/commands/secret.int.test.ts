import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiTokenSecrets } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { secretCommand } from './secret.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('threadline secret rotate', () => {
  it('replaces the pagination-token secret and keeps the previous one', async () => {
    const before = await apiTokenSecrets(env.db)
    await secretCommand(env.config, ['rotate'])
    const after = await apiTokenSecrets(env.db)
    expect(after.current).not.toBe(before.current)
    expect(after.previous).toBe(before.current)
  })

  it('names its only subcommand', async () => {
    await expect(secretCommand(env.config, ['show'])).rejects.toThrow(/threadline secret rotate/)
  })
})
