import { existsSync, readdirSync, readFileSync, realpathSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { build, type Plugin } from 'esbuild'

/**
 * `pnpm build`'s own step: compiles each deployable (`services/<role>/src/main.ts` and the CLI's
 * `packages/cli/src/main.ts`) into one ESM file beside its sources, `dist/main.js`, for the
 * production image. Workspace packages are bundled in; third-party packages stay imports that Node
 * resolves at run time from the image's flat production `node_modules`, so each must be a
 * production dependency of the package that imports it, and one version for all of them.
 */

const root = join(dirname(fileURLToPath(import.meta.url)), '..')

const builtins = new Set(builtinModules)

/** `@scope/name/sub` → `@scope/name`, `name/sub` → `name`. */
function packageName(specifier: string): string {
  const parts = specifier.split('/')
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!
}

/** The nearest package.json at or above dir. */
function manifestOf(dir: string): { path: string; json: Record<string, any> } {
  for (let at = dir; ; at = dirname(at)) {
    const path = join(at, 'package.json')
    if (existsSync(path)) return { path, json: JSON.parse(readFileSync(path, 'utf8')) }
    if (dirname(at) === at) throw new Error(`no package.json above ${dir}`)
  }
}

/** Where Node finds package `name` from dir: the first node_modules/name on the way up. */
function installedVersion(name: string, dir: string): string | undefined {
  for (let at = dir; ; at = dirname(at)) {
    const path = join(at, 'node_modules', name, 'package.json')
    if (existsSync(path)) {
      return (JSON.parse(readFileSync(realpathSync(path), 'utf8')) as { version: string }).version
    }
    if (dirname(at) === at) return undefined
  }
}

/** Keeps third-party packages external, and checks that the image can resolve them as they are. */
function thirdPartyExternal(problems: string[]): Plugin {
  const versions = new Map<string, Map<string, string>>()
  return {
    name: 'third-party-external',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, (args) => {
        if (args.path.startsWith('node:') || builtins.has(args.path)) {
          return { path: args.path, external: true }
        }
        if (args.path.startsWith('@threadline/')) return undefined
        const name = packageName(args.path)
        const importer = manifestOf(args.resolveDir)
        const where = relative(root, importer.path)
        if (!(name in (importer.json.dependencies ?? {}))) {
          problems.push(`${args.importer} imports ${name}, not in ${where}'s dependencies`)
        }
        const version = installedVersion(name, args.resolveDir) ?? 'missing'
        const seen = versions.get(name) ?? new Map<string, string>()
        seen.set(where, version)
        versions.set(name, seen)
        return { path: args.path, external: true }
      })
      build.onEnd(() => {
        for (const [name, seen] of versions) {
          if (new Set(seen.values()).size > 1) {
            const list = [...seen].map(([where, v]) => `${where}: ${v}`).join(', ')
            problems.push(`${name} resolves to more than one version (${list})`)
          }
        }
      })
    },
  }
}

/**
 * A bundled module's `import.meta.url` would be the bundle's: each workspace module gets the URL
 * of its own source file instead, so that code which finds files beside its sources (a package's
 * `dist/`, say) finds them in the image as in development. Every bundle is `<dir>/<name>/dist/
 * main.js`, three levels below the root, which the image keeps as the checkout's.
 */
function ownImportMetaUrl(): Plugin {
  return {
    name: 'own-import-meta-url',
    setup(build) {
      build.onLoad({ filter: /\.ts$/ }, (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`)) return undefined
        const source = readFileSync(args.path, 'utf8')
        if (!source.includes('import.meta.url')) return undefined
        const fromBundle = JSON.stringify(
          `../../../${relative(root, args.path).split(sep).join('/')}`,
        )
        return {
          contents: source.replaceAll(
            'import.meta.url',
            `new URL(${fromBundle}, import.meta.url).href`,
          ),
          loader: 'ts',
        }
      })
    },
  }
}

const entryPoints = [
  ...readdirSync(join(root, 'services')).map((role) => `services/${role}`),
  'packages/cli',
]
  .filter((dir) => existsSync(join(root, dir, 'src/main.ts')))
  .map((dir) => ({ in: `${dir}/src/main.ts`, out: `${dir}/dist/main` }))

const problems: string[] = []
await build({
  absWorkingDir: root,
  entryPoints,
  outdir: '.',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20.19',
  sourcemap: 'linked',
  logLevel: 'warning',
  plugins: [thirdPartyExternal(problems), ownImportMetaUrl()],
})
if (problems.length > 0) {
  throw new Error(`the bundles would not run in the image:\n  ${problems.join('\n  ')}`)
}
process.stdout.write(`built ${entryPoints.map((e) => `${e.out}.js`).join(', ')}\n`)
