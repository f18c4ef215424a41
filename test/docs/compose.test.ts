import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { parse } from 'yaml'
import { parseRoles } from '@threadline/cli'
import { envSchema, loadConfig } from '@threadline/config'

// docker-compose.yml is the production path, and no container engine runs here: this reads it as
// compose would (merge keys, `${VAR:-default}` with nothing set) and checks its wiring against the
// code it starts, so that a renamed variable, role or port fails here rather than in a deploy.

const root = new URL('../../', import.meta.url)
const read = (path: string) => readFileSync(new URL(path, root), 'utf8')

type Service = {
  build?: { dockerfile: string }
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

/** The services that run the Threadline image (every one but Postgres and Redis). */
const appServices = Object.keys(services).filter((name) => services[name]!.build !== undefined)

describe('docker-compose.yml', () => {
  it('runs each role of the image in a service of its own, the simulator only in its profile', () => {
    expect([...appServices].sort()).toEqual(
      ['api', 'delivery', 'ingest', 'migrate', 'simulator', 'writer'].sort(),
    )
    const started = appServices.flatMap((name) => {
      const command = services[name]!.command!
      expect(['migrate', 'start', 'simulate'], `${name}: ${command.join(' ')}`).toContain(
        command[0],
      )
      if (command[0] !== 'start') return []
      const roles = command[command.indexOf('--roles') + 1]
      return parseRoles(roles) // throws on a role the CLI does not know
    })
    expect(started.sort()).toEqual(parseRoles(undefined).sort())
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

  it('names files that exist: the Dockerfile, what it copies first, the mounted configs', () => {
    const dockerfile = services.writer!.build!.dockerfile
    expect(existsSync(new URL(dockerfile, root)), dockerfile).toBe(true)
    const copied = [...read(dockerfile).matchAll(/^COPY (?!--from)(.+) \.\/$/gm)].flatMap((m) =>
      m[1]!.split(' '),
    )
    const mounted = Object.values(services).flatMap((s) =>
      (s.volumes ?? []).filter((v) => v.startsWith('./')).map((v) => v.split(':')[0]!),
    )
    expect(copied.length).toBeGreaterThan(0)
    expect(mounted.length).toBeGreaterThan(0)
    for (const path of [...copied, ...mounted]) {
      expect(existsSync(new URL(path, root)), path).toBe(true)
    }
  })

  it("starts the image's entrypoint with what a production install has, on a Node it supports", () => {
    const dockerfile = read(services.writer!.build!.dockerfile)
    const entrypoint = JSON.parse(/^ENTRYPOINT (.+)$/m.exec(dockerfile)![1]!) as string[]
    const imported = entrypoint[entrypoint.indexOf('--import') + 1]!
    const script = entrypoint[entrypoint.length - 1]!
    expect(entrypoint).toContain('node')
    expect(existsSync(new URL(script, root)), script).toBe(true)
    // `pnpm install --prod` leaves out the root's devDependencies.
    const manifest = JSON.parse(read('package.json')) as {
      dependencies?: Record<string, string>
      engines: { node: string }
    }
    expect(Object.keys(manifest.dependencies ?? {})).toContain(imported)
    const minimum = /^>=(\d+)\.(\d+)/.exec(manifest.engines.node)!.slice(1).map(Number)
    const images = [...dockerfile.matchAll(/^FROM node:(\d+)\.(\d+)/gm)]
    expect(images.length).toBeGreaterThan(0)
    for (const [image, major, minor] of images) {
      const atLeast = Number(major) * 1000 + Number(minor) >= minimum[0]! * 1000 + minimum[1]!
      expect(atLeast, `${image} against engines ${manifest.engines.node}`).toBe(true)
    }
  })
})
