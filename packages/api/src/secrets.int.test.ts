import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiTokenSecrets, rotateApiTokenSecret } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { createPageTokens } from './page-token.js'

/** Pagination-token secrets: generated per deployment, rotatable (docs/operations.md, "Secrets"). */
let env: TestEnv
let other: TestEnv

beforeAll(async () => {
  ;[env, other] = await Promise.all([createTestEnv(), createTestEnv()])
})
afterAll(async () => {
  await env?.close()
  await other?.close()
})

describe('API token secret', () => {
  it('each database gets its own strong secret on migrate', async () => {
    const a = await apiTokenSecrets(env.db)
    const b = await apiTokenSecrets(other.db)
    expect(a.current).toMatch(/^[\w-]{43}$/)
    expect(a.current).not.toBe(b.current)
    expect(a.previous).toBeUndefined()
  })

  it('a rotation keeps the previous secret for verification until the next one', async () => {
    const before = await apiTokenSecrets(env.db)
    const old = createPageTokens(before.current).encode('scope', '42')
    await rotateApiTokenSecret(env.db)
    const after = await apiTokenSecrets(env.db)
    expect(after.current).not.toBe(before.current)
    expect(after.previous).toBe(before.current)
    const tokens = createPageTokens(after.current, after.previous)
    expect(tokens.decode('scope', old)).toBe('42')
    const fresh = tokens.encode('scope', '43')
    expect(createPageTokens(after.current).decode('scope', fresh)).toBe('43')

    await rotateApiTokenSecret(env.db)
    const twice = await apiTokenSecrets(env.db)
    expect(createPageTokens(twice.current, twice.previous).decode('scope', old)).toBeUndefined()
    expect(createPageTokens(twice.current, twice.previous).decode('scope', fresh)).toBe('43')
  })
})
