import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { envSchema } from '@threadline/config'

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')

describe('README', () => {
  it('documents every configuration variable', () => {
    const documented = new Set([...readme.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1]))
    const missing = Object.keys(envSchema.shape).filter((name) => !documented.has(name))
    expect(missing).toEqual([])
  })

  it('documents no variable the code does not read', () => {
    const known = new Set(Object.keys(envSchema.shape))
    const table = readme.slice(readme.indexOf('## Configuration'))
    const stale = [...table.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)]
      .map((m) => m[1])
      .filter((name) => !known.has(name!))
    expect(stale).toEqual([])
  })

  it('names the test command CI runs', () => {
    expect(readme).toContain('pnpm test')
    expect(readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8')).toMatch(/^pnpm test$/m)
  })
})
