import { existsSync, readdirSync, readFileSync } from 'node:fs'
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

/** README.md and every docs/*.md, with where each lives (links resolve from there). */
const root = new URL('../../', import.meta.url)
const docs = [
  'README.md',
  ...readdirSync(new URL('docs/', root))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
].map((path) => ({ path, text: readFileSync(new URL(path, root), 'utf8') }))
const named = (pattern: RegExp) =>
  [...new Set(docs.flatMap(({ text }) => [...text.matchAll(pattern)].map((m) => m[1]!)))].sort()

/** The non-test TypeScript sources of every package, as one text to search for names. */
function sources(dir: URL): string {
  return readdirSync(dir, { withFileTypes: true })
    .map((entry) => {
      if (entry.isDirectory())
        return entry.name === 'node_modules' ? '' : sources(new URL(`${entry.name}/`, dir))
      return /\.ts$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)
        ? readFileSync(new URL(entry.name, dir), 'utf8')
        : ''
    })
    .join('\n')
}

describe('what the docs name exists', () => {
  it('every relative link points at a file of the repository', () => {
    const broken = docs.flatMap(({ path, text }) =>
      [...text.matchAll(/\]\(([^)\s]+)\)/g)]
        .map((m) => m[1]!.split('#')[0]!)
        .filter((target) => target !== '' && !/^[a-z]+:/.test(target))
        .filter((target) => !existsSync(new URL(target, new URL(path, root))))
        .map((target) => `${path} → ${target}`),
    )
    expect(broken).toEqual([])
  })

  it('every metric the docs name is registered by the code', () => {
    const code = sources(new URL('packages/', root))
    // Compose names its volumes `threadline_<volume>` too: those are not metrics.
    const compose = readFileSync(new URL('docker-compose.yml', root), 'utf8')
    const volumes = [...compose.slice(compose.search(/^volumes:/m)).matchAll(/^ {2}(\w+):/gm)]
    const volume = new RegExp(`^threadline_(${volumes.map((m) => m[1]).join('|')})`)
    const unknown = named(/\b(threadline_[a-z0-9_]+)/g)
      .filter((name) => !volume.test(name))
      .map((name) => name.replace(/_(bucket|sum|count)$/, ''))
      .filter((name) => !code.includes(`'${name}'`))
    expect(unknown).toEqual([])
  })

  it('every threadline command and pnpm script the docs name exists', () => {
    const cli = readFileSync(new URL('packages/cli/src/run.ts', root), 'utf8')
    const commands = new Set([...cli.matchAll(/case '([a-z]+)':/g)].map((m) => m[1]!))
    expect(named(/`(?:pnpm )?threadline ([a-z]+)/g).filter((c) => !commands.has(c))).toEqual([])

    const scripts = Object.keys(
      (JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as { scripts: object })
        .scripts,
    )
    const builtIn = new Set(['install', 'exec', 'run', 'add'])
    expect(
      named(/`pnpm ([a-z:-]+)/g).filter((s) => !scripts.includes(s) && !builtIn.has(s)),
    ).toEqual([])

    const benches = new Set(
      readdirSync(new URL('test/bench/', root)).map((f) => f.replace(/\.ts$/, '')),
    )
    expect(named(/`pnpm bench ([a-z-]+)/g).filter((b) => !benches.has(b))).toEqual([])
  })
})
