import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { envSchema } from '@threadline/config'

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
const configuration = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8')
/** The variables the tables of docs/configuration.md list (its "Tests" section has no table). */
const documented = [...configuration.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]!)

describe('docs', () => {
  it('documents every configuration variable', () => {
    const missing = Object.keys(envSchema.shape).filter((name) => !documented.includes(name))
    expect(missing).toEqual([])
  })

  it('documents no variable the code does not read, and each once', () => {
    const known = new Set(Object.keys(envSchema.shape))
    expect(documented.filter((name) => !known.has(name))).toEqual([])
    expect(documented.length).toBe(new Set(documented).size)
  })

  it('names the test command CI runs', () => {
    expect(readme).toContain('pnpm test')
    expect(readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8')).toMatch(/^pnpm test$/m)
  })
})
