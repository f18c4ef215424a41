import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { parseRoles } from '@threadline/cli'
import { envSchema, loadConfig } from '@threadline/config'

// docker-compose.yml and infra/Dockerfile are the production path. This reads them as compose
// would (merge keys, `${VAR:-default}` with nothing set), without a container engine, and checks
// their wiring against the code they start, so that a renamed variable, role or port fails in
// `pnpm test` rather than in a deploy; `pnpm test:compose` builds and runs them for real.

const root = new URL('../../', import.meta.url)
const read = (path: string) => readFileSync(new URL(path, root), 'utf8')

type Service = {
  image?: string
  build?: { context: string; dockerfile?: string }
  command?: string[]
  environment?: Record<string, string | number | boolean>
  depends_on?: Record<string, { condition: string }>
  profiles?: string[]
  deploy?: { replicas?: number }
  ports?: string[]
  volumes?: string[]
  healthcheck?: { test: string[] }
}

const compose = parse(read('docker-compose.yml'), { merge: true }) as {
  services: Record<string, Service>
}
const services = compose.services

/** Compose's interpolation with an empty environment: `${A:-d}` and `${A-d}` give d, `${A}` ''. */
function interpolate(value: string): string {
  return value.replace(/\$\{[A-Z0-9_]+(?::?-([^}]*))?\}/g, (_, fallback?: string) => fallback ?? '')
}

function env(name: string): Record<string, string> {
  const entries = Object.entries(services[name]!.environment ?? {})
  return Object.fromEntries(entries.map(([k, v]) => [k, interpolate(String(v))]))
}

/** The services that run the Threadline image (every one but Postgres, its backups and Redis). */
const appServices = Object.keys(services).filter(
  (name) => services[name]!.image === 'threadline:latest',
)

describe('docker-compose.yml', () => {
  it("runs each role's compiled main in a service of its own, the simulator only in its profile", () => {
    expect([...appServices].sort()).toEqual(
      ['api', 'delivery', 'ingest', 'migrate', 'simulator', 'writer'].sort(),
    )
    // The entrypoint runs services/<role>/dist/main.js for a role, the CLI for anything else.
    const roles = appServices.flatMap((name) => {
      const command = services[name]!.command!
      if (command[0] === 'migrate') return []
      expect(command, name).toEqual([name])
      expect(existsSync(new URL(`services/${name}/src/main.ts`, root)), name).toBe(true)
      return [name]
    })
    const simulator = roles.filter((role) => role === 'simulator')
    expect(simulator).toEqual(['simulator'])
    expect(roles.filter((role) => role !== 'simulator').sort()).toEqual(
      parseRoles(undefined).sort(),
    )
    expect(services.simulator!.profiles).toEqual(['simulator'])
    // One ingest: a second replica would only wait on the stream lock.
    expect(services.ingest!.deploy?.replicas ?? 1).toBe(1)
  })

  it('gives each service an environment the config accepts, with no name it does not read', () => {
    const known = new Set([...Object.keys(envSchema.shape), 'NODE_OPTIONS'])
    for (const name of appServices) {
      const vars = env(name)
      expect(
        Object.keys(vars).filter((k) => !known.has(k)),
        name,
      ).toEqual([])
      expect(() => loadConfig(vars), name).not.toThrow()
    }
  })

  it("sets only NODE_OPTIONS that this Node accepts (it refuses to start on one it doesn't)", () => {
    const options = new Set(appServices.map((name) => env(name).NODE_OPTIONS).filter(Boolean))
    expect(options.size).toBeGreaterThan(0)
    for (const value of options) {
      const env = { PATH: process.env.PATH, NODE_OPTIONS: value }
      expect(execFileSync(process.execPath, ['-p', '"ok"'], { env }).toString().trim()).toBe('ok')
    }
  })

  it('points the services at each other as the other side listens', () => {
    const postgres = env('postgres')
    const db = new URL(env('writer').DATABASE_URL!)
    expect([db.hostname, db.port, decodeURIComponent(db.username)]).toEqual([
      'postgres',
      '5432',
      postgres.POSTGRES_USER,
    ])
    expect(decodeURIComponent(db.password)).toBe(postgres.POSTGRES_PASSWORD)
    expect(db.pathname).toBe(`/${postgres.POSTGRES_DB}`)
    expect(new URL(env('writer').REDIS_URL!).host).toBe('redis:6379')

    // The ingest's default upstream is the simulator, with the simulator's token.
    const simulator = loadConfig(env('simulator'))
    const ingest = loadConfig(env('ingest'))
    expect(ingest.UPSTREAM_URL).toBe(`http://simulator:${simulator.SIMULATOR_PORT}`)
    expect(ingest.UPSTREAM_BEARER_TOKEN).toBe(simulator.SIMULATOR_BEARER_TOKEN)

    // The API listens on every interface, on the port compose publishes and its health check asks.
    const api = loadConfig(env('api'))
    expect(api.HOST).toBe('0.0.0.0')
    const published = services.api!.ports!.map((p) => interpolate(p).split(':').pop())
    expect(published).toEqual([String(api.PORT)])
    expect(services.api!.healthcheck!.test.join(' ')).toContain(`127.0.0.1:${api.PORT}/ready`)
  })

  it('waits for what each service needs', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const dependency of Object.keys(service.depends_on ?? {})) {
        expect(Object.keys(services), `${name} depends on ${dependency}`).toContain(dependency)
      }
    }
    expect(services.migrate!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } })
    for (const name of appServices.filter((n) => n !== 'migrate' && n !== 'simulator')) {
      expect(services[name]!.depends_on, name).toMatchObject({
        migrate: { condition: 'service_completed_successfully' },
        redis: { condition: 'service_healthy' },
      })
    }
  })

  it('names files that exist: the Dockerfile, what it copies from the checkout, the mounted configs', () => {
    const dockerfile = services.writer!.build!.dockerfile!
    expect(existsSync(new URL(dockerfile, root)), dockerfile).toBe(true)
    const copied = [...read(dockerfile).matchAll(/^COPY (?!--from)(.+)$/gm)].flatMap((m) =>
      m[1]!.split(' ').slice(0, -1),
    )
    const mounted = Object.values(services).flatMap((s) =>
      (s.volumes ?? []).filter((v) => v.startsWith('./')).map((v) => v.split(':')[0]!),
    )
    expect(copied).toContain('infra/entrypoint.sh')
    expect(mounted.length).toBeGreaterThan(0)
    for (const path of [...copied, ...mounted]) {
      expect(existsSync(new URL(path, root)), path).toBe(true)
    }
  })

  it('archives WAL and backs up into the repository pgBackRest is configured with, on both sides', () => {
    const conf = read('infra/postgres/pgbackrest.conf')
    const option = (name: string) => new RegExp(`^${name}=(.+)$`, 'm').exec(conf)?.[1]
    const stanzas = [...conf.matchAll(/^\[([^\]:]+)\]$/gm)]
      .map((m) => m[1])
      .filter((n) => n !== 'global')
    expect(stanzas).toEqual(['threadline'])
    const settings = read('infra/postgres/postgresql.conf')
    expect(settings).toMatch(/^archive_mode = on$/m)
    expect(settings).toContain("archive_command = 'pgbackrest --stanza=threadline archive-push %p'")

    // One image for the server and the backup service, built from infra/postgres/Dockerfile.
    const { postgres, backup } = services as Record<string, Service>
    expect(backup!.image).toBe(postgres!.image)
    expect(backup!.build).toEqual(postgres!.build)
    const dockerfile = read(`${postgres!.build!.context}/Dockerfile`)
    expect(dockerfile).toMatch(/^FROM postgres:15-bookworm$/m)
    expect(dockerfile).toContain('COPY pgbackrest.conf /etc/pgbackrest/pgbackrest.conf')
    expect(dockerfile).toContain('COPY backup.sh /usr/local/bin/threadline-backup')
    expect(dockerfile).toContain('ENV PGBACKREST_STANZA=threadline')

    // Both reach the data directory, the repository and the socket (with the locks) where the
    // configuration says, on the same volumes; the backup connects as the cluster's superuser.
    const shared = [
      `pgdata:${option('pg1-path')}`,
      `pgbackrest:${option('repo1-path')}`,
      `pgsocket:${option('pg1-socket-path')}`,
    ]
    expect(option('lock-path')!.startsWith(`${option('pg1-socket-path')}/`)).toBe(true)
    for (const service of [postgres!, backup!])
      expect(service.volumes).toEqual(expect.arrayContaining(shared))
    expect(option('pg1-user')).toBe(env('postgres').POSTGRES_USER)
    expect(option('pg1-database')).toBe(env('postgres').POSTGRES_DB)
    expect(backup!.command).toEqual(['threadline-backup', 'schedule'])
    expect(backup!.healthcheck!.test).toEqual(['CMD', 'threadline-backup', 'status'])
    expect(backup!.depends_on).toEqual({ postgres: { condition: 'service_healthy' } })
  })

  it('builds JavaScript in the image and runs it with production dependencies on a supported Node', () => {
    const dockerfile = read(services.writer!.build!.dockerfile!)
    const manifest = JSON.parse(read('package.json')) as {
      scripts: Record<string, string>
      dependencies?: Record<string, string>
      engines: { node: string }
    }
    // The build stage compiles: `pnpm build` runs every package's build and bundles the mains.
    expect(dockerfile).toMatch(/^RUN pnpm build$/m)
    expect(manifest.scripts.build).toContain('pnpm -r --if-present run build')
    expect(manifest.scripts.build).toContain('infra/build.ts')
    // The runtime stage starts node on what the build made, through tini, with no TypeScript loader.
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '))
    const entrypoint = JSON.parse(/^ENTRYPOINT (.+)$/m.exec(runtime)![1]!) as string[]
    expect(entrypoint.slice(0, 2)).toEqual(['tini', '--'])
    expect(runtime).toContain(`COPY infra/entrypoint.sh /usr/local/bin/${entrypoint[2]}`)
    const script = read('infra/entrypoint.sh')
    expect(script).toContain('exec node "$main"')
    expect(script).toContain('/app/services/$1/dist/main.js')
    expect(script).toContain('exec node /app/packages/cli/dist/main.js')
    expect(existsSync(new URL('packages/cli/src/main.ts', root))).toBe(true)
    expect(runtime).not.toMatch(/tsx|--import/)
    expect(dockerfile).toContain('--prod')
    // No production dependency anywhere brings TypeScript tooling into the image.
    const workspaces = ['packages', 'services'].flatMap((top) =>
      readdirSync(new URL(`${top}/`, root)).map((name) => `${top}/${name}/package.json`),
    )
    for (const path of ['package.json', ...workspaces].filter((p) =>
      existsSync(new URL(p, root)),
    )) {
      const deps = (JSON.parse(read(path)) as { dependencies?: Record<string, string> })
        .dependencies
      expect(Object.keys(deps ?? {}), path).not.toContain('tsx')
      expect(Object.keys(deps ?? {}), path).not.toContain('typescript')
    }
    const minimum = /^>=(\d+)\.(\d+)/.exec(manifest.engines.node)!.slice(1).map(Number)
    const images = [...dockerfile.matchAll(/^FROM node:(\d+)\.(\d+)/gm)]
    expect(images.length).toBeGreaterThan(0)
    for (const [image, major, minor] of images) {
      const atLeast = Number(major) * 1000 + Number(minor) >= minimum[0]! * 1000 + minimum[1]!
      expect(atLeast, `${image} against engines ${manifest.engines.node}`).toBe(true)
    }
  })

  it('lets the install scripts that pnpm fetch runs in the image be known to it', () => {
    // The image's `pnpm fetch` sees only the lockfile, pnpm-workspace.yaml and .npmrc.
    const workspace = parse(read('pnpm-workspace.yaml')) as { onlyBuiltDependencies?: string[] }
    expect(workspace.onlyBuiltDependencies).toEqual(
      expect.arrayContaining(['esbuild', 'msgpackr-extract']),
    )
    const manifest = JSON.parse(read('package.json')) as {
      pnpm?: { onlyBuiltDependencies?: string[] }
    }
    expect(manifest.pnpm?.onlyBuiltDependencies).toBeUndefined()
  })
})
