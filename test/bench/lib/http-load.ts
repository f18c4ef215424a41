import { spawn, type ChildProcess } from 'node:child_process'
import type http from 'node:http'
import { createInterface } from 'node:readline'
import autocannon from 'autocannon'
import type pg from 'pg'
import { buildServer } from '@threadline/api'
import { loadConfig } from '@threadline/config'
import { createDb } from '@threadline/db'
import { silentLogger } from '@threadline/logger'
import { createRedis, deleteByPrefix } from '@threadline/redis'

/**
 * A server child's body: the API over the bench's database with rate limits out of the way, its
 * URL printed for `startServerChild`. Stopped by the parent once no request is left; the
 * rate-limit windows it counted in Redis go first, on its own connection (which close closes).
 */
export async function serveApi(databaseUrl: string, name: string): Promise<void> {
  const config = loadConfig()
  const prefix = `${name}-${process.pid}`
  const db = createDb({ url: databaseUrl, poolMax: 10, applicationName: name })
  const redis = createRedis(config.REDIS_URL, 'producer', name)
  const server = buildServer(
    { db, redis, logger: silentLogger(), tokenSecrets: { current: 'bench' } },
    {
      host: '127.0.0.1',
      port: 0,
      prefix,
      rateLimits: { lookup: 1e9, search: 1e9, counts: 1e9, rules: 1e9 },
      ruleCap: 1000,
      queryMaxLength: 1024,
      bodyLimit: 1_048_576,
      tokenCacheMs: 60_000,
    },
  )
  await server.start()
  process.stdout.write(`listening ${server.url()}\n`)
  process.once('SIGTERM', () => {
    void deleteByPrefix(redis, prefix).finally(() => server.close())
  })
}

/**
 * A bare baseline server child's body once its handler is made: listens on a free port, prints its
 * URL for `startServerChild`, and closes with its pool on SIGTERM.
 */
export function serveBare(server: http.Server, pool: pg.Pool): void {
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number }
    process.stdout.write(`listening http://127.0.0.1:${port}\n`)
  })
  process.once('SIGTERM', () => {
    server.close()
    void pool.end()
  })
}

/**
 * Starts `script mode` in a process of its own (the server under load never shares a CPU's event
 * loop with the load generator) and resolves once it prints `listening <url>`.
 */
export function startServerChild(
  script: string,
  mode: string,
  nodeFlags: readonly string[] = [],
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...nodeFlags, '--import', 'tsx', script, mode], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${mode} did not start`)), 30_000)
    child.once('exit', (code) => reject(new Error(`${mode} exited with ${code}`)))
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^listening (\S+)/.exec(line)
      if (m) {
        clearTimeout(timer)
        resolve({ child, url: m[1]! })
      }
    })
  })
}

export async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

export interface LoadFigures {
  rps: number
  p50: number
  p99: number
  errors: number
  non2xx: number
}

/** `duration` seconds of autocannon against `base`, each request's path from `paths()`. */
export async function load(
  base: string,
  paths: () => string,
  headers: Record<string, string>,
  options: { connections: number; duration: number },
): Promise<LoadFigures> {
  const result = await autocannon({
    url: base,
    connections: options.connections,
    duration: options.duration,
    headers,
    requests: [{ setupRequest: (req) => ({ ...req, path: paths() }) }],
  })
  return {
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors,
    non2xx: result.non2xx,
  }
}

/** Several rounds as one: mean req/s, the worst latencies, errors summed. */
export function combine(rounds: readonly LoadFigures[]): LoadFigures {
  return {
    rps: Math.round(rounds.reduce((sum, r) => sum + r.rps, 0) / rounds.length),
    p50: Math.max(...rounds.map((r) => r.p50)),
    p99: Math.max(...rounds.map((r) => r.p99)),
    errors: rounds.reduce((sum, r) => sum + r.errors, 0),
    non2xx: rounds.reduce((sum, r) => sum + r.non2xx, 0),
  }
}
