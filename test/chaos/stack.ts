import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process'
import {
  chmodSync,
  chownSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
} from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { RoleTuning } from '@threadline/cli'
import { createDb, type Db } from '@threadline/db'
import { waitFor } from '@threadline/testing'

const execFileAsync = promisify(execFile)

/** The checkout root: child processes run from here. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** The `threadline` command, with the tuning the stack passes in THREADLINE_TEST_TUNING. */
const CLI = 'test/support/tuned-cli.ts'
const PROBE = fileURLToPath(new URL('./memory-probe.ts', import.meta.url))

// ---- binaries ------------------------------------------------------------------------------------

export interface Binaries {
  /** Directory holding initdb, pg_ctl and postgres. */
  pgBin: string
  redisServer: string
  /** Postgres refuses to run as root: the uid/gid to run it as (the `postgres` user) when we are root. */
  pgUser?: { uid: number; gid: number }
}

/** In CI (CI=true) the chaos suites must run: missing binaries fail them instead of skipping them. */
export const MUST_RUN = process.env.CI === 'true' || process.env.CI === '1'

export type BinariesResult = { ok: true; bin: Binaries } | { ok: false; reason: string }

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name)
  }
  return undefined
}

function pgBinDir(): string | undefined {
  const complete = (dir: string) =>
    ['initdb', 'pg_ctl', 'postgres'].every((b) => existsSync(join(dir, b)))
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim()
    if (complete(dir)) return dir
  } catch {
    // No pg_config (client-only installs): look where Debian and Ubuntu put the server.
  }
  const base = '/usr/lib/postgresql'
  if (!existsSync(base)) return undefined
  const versions = readdirSync(base)
    .filter((v) => /^\d+$/.test(v))
    .sort((a, b) => Number(b) - Number(a))
  return versions.map((v) => join(base, v, 'bin')).find(complete)
}

/**
 * The server binaries the suite runs privately. When something is missing the reason says what and
 * how to get it, so the suite can skip with a clear message instead of failing mysteriously.
 */
export function findBinaries(): BinariesResult {
  const pgBin = pgBinDir()
  const redisServer = onPath('redis-server')
  const missing: string[] = []
  if (!pgBin)
    missing.push(
      'Postgres server binaries (initdb, pg_ctl, postgres; e.g. apt-get install postgresql-15)',
    )
  if (!redisServer) missing.push('redis-server (e.g. apt-get install redis-server)')
  if (missing.length > 0) return { ok: false, reason: `missing ${missing.join(' and ')}` }
  let pgUser: Binaries['pgUser']
  if (process.getuid?.() === 0) {
    const line = readFileSync('/etc/passwd', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('postgres:'))
    if (!line)
      return {
        ok: false,
        reason: 'running as root and there is no `postgres` user to run a private Postgres as',
      }
    const [, , uid, gid] = line.split(':')
    pgUser = { uid: Number(uid), gid: Number(gid) }
  }
  return { ok: true, bin: { pgBin: pgBin!, redisServer: redisServer!, pgUser } }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port
      srv.close(() => resolve(port))
    })
  })
}

/** VmRSS of a process in bytes, from /proc (undefined once it is gone or off Linux). */
export function rssOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : undefined
  } catch {
    return undefined
  }
}

// ---- private Postgres ------------------------------------------------------------------------------

/** A Postgres cluster in a temp directory on its own port, owned by the suite so it can be restarted. */
export class PrivatePostgres {
  readonly dataDir: string
  readonly logFile: string
  restarts = 0

  constructor(
    private readonly bin: Binaries,
    readonly dir: string,
    readonly port: number,
  ) {
    this.dataDir = join(dir, 'data')
    this.logFile = join(dir, 'postgres.log')
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/threadline`
  }

  private async run(cmd: string, args: string[], timeoutMs = 60_000): Promise<string> {
    try {
      const { stdout } = await execFileAsync(join(this.bin.pgBin, cmd), args, {
        cwd: this.dir,
        timeout: timeoutMs,
        ...(this.bin.pgUser ?? {}),
      })
      return stdout
    } catch (error) {
      const e = error as { stderr?: string; message: string }
      throw new Error(
        `${cmd} ${args.join(' ')} failed: ${e.stderr || e.message}\n${this.logTail()}`,
      )
    }
  }

  async init(): Promise<void> {
    if (this.bin.pgUser) chownSync(this.dir, this.bin.pgUser.uid, this.bin.pgUser.gid)
    await this.run('initdb', ['-D', this.dataDir, '-U', 'postgres', '-A', 'trust', '--no-sync'])
  }

  async start(): Promise<void> {
    const options = [
      `-p ${this.port}`,
      '-c listen_addresses=127.0.0.1',
      `-c unix_socket_directories=${this.dir}`,
      // Durable as in production (fsync, synchronous commit): the suite crashes this server too.
      '-c max_connections=200',
    ].join(' ')
    await this.run('pg_ctl', [
      '-D',
      this.dataDir,
      '-l',
      this.logFile,
      '-o',
      options,
      '-w',
      '-t',
      '60',
      'start',
    ])
  }

  /** `pg_ctl stop -m fast`: every connection is cut, as in a failover or a restart for an upgrade. */
  async stop(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.run('pg_ctl', ['-D', this.dataDir, '-m', mode, '-w', '-t', '60', 'stop'])
  }

  /** `fast`: a clean stop; `immediate`: a crash (no checkpoint), recovered from the WAL on start. */
  async restart(mode: 'fast' | 'immediate' = 'fast'): Promise<void> {
    await this.stop(mode)
    await this.start()
    this.restarts++
  }

  pid(): number | undefined {
    try {
      return Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0])
    } catch {
      return undefined
    }
  }

  logTail(lines = 20): string {
    try {
      return readFileSync(this.logFile, 'utf8').split('\n').slice(-lines).join('\n')
    } catch {
      return ''
    }
  }
}

// ---- private Redis ---------------------------------------------------------------------------------

/** A redis-server on its own port with AOF (as production requires), so a restart keeps the queues. */
export class PrivateRedis {
  private child: ChildProcess | undefined
  private output = ''
  restarts = 0

  constructor(
    private readonly bin: Binaries,
    readonly dir: string,
    readonly port: number,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  async start(): Promise<void> {
    mkdirSync(this.dir, { recursive: true })
    const child = spawn(
      this.bin.redisServer,
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--dir',
        this.dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--save',
        '',
        '--maxmemory-policy',
        'noeviction',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    this.child = child
    this.output = ''
    const keep = (chunk: Buffer) => {
      this.output = (this.output + chunk.toString('utf8')).slice(-8_000)
    }
    child.stderr!.on('data', keep)
    await new Promise<void>((resolve, reject) => {
      const onExit = (code: number | null) =>
        reject(new Error(`redis-server exited with ${code} before it was ready:\n${this.output}`))
      child.once('exit', onExit)
      child.stdout!.on('data', (chunk: Buffer) => {
        keep(chunk)
        // Printed after the AOF is loaded, so the restarted server already holds the queues.
        if (this.output.includes('Ready to accept connections')) {
          child.off('exit', onExit)
          resolve()
        }
      })
    })
  }

  /**
   * SIGKILL by default: the harshest stop. With AOF every acknowledged write was already handed to
   * the OS, so a killed server restarts with everything it confirmed.
   */
  async stop(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const child = this.child
    this.child = undefined
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.kill(signal)
    await exited
  }

  async restart(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    await this.stop(signal)
    await this.start()
    this.restarts++
  }
}

// ---- Threadline processes ----------------------------------------------------------------------------

export interface MemorySample {
  rss?: number
  heapUsed?: number
  heapTotal?: number
}

/** One `node --import tsx packages/cli/src/main.ts …` child, its output in a log file. */
export class ServiceProcess {
  private child: ChildProcess | undefined
  readonly logFile: string
  private exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }> | undefined

  constructor(
    readonly name: string,
    private readonly args: string[],
    private readonly env: Record<string, string>,
    private readonly dirs: { logs: string; probe: string },
  ) {
    this.logFile = join(dirs.logs, `${name}.log`)
  }

  /** Whether its log holds `text` (the ingest logs at info: `leading`, `ingest started`). */
  logged(text: string): boolean {
    try {
      return readFileSync(this.logFile, 'utf8').includes(text)
    } catch {
      return false
    }
  }

  get pid(): number | undefined {
    return this.child?.pid
  }

  get running(): boolean {
    return !!this.child && this.child.exitCode === null && this.child.signalCode === null
  }

  start(): this {
    const fd = openSync(this.logFile, 'a')
    const child = spawn(
      process.execPath,
      ['--import', 'tsx', '--import', PROBE, CLI, ...this.args],
      {
        cwd: REPO_ROOT,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: process.env.HOME ?? tmpdir(),
          THREADLINE_MEMORY_PROBE_DIR: this.dirs.probe,
          ...this.env,
        },
        stdio: ['ignore', fd, fd],
      },
    )
    closeSync(fd)
    this.child = child
    this.exit = new Promise((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    )
    return this
  }

  /** Resolves with the exit code once the process is gone. */
  exited(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (!this.exit) throw new Error(`${this.name} was never started`)
    return this.exit
  }

  /** Set once the suite killed it on purpose (a fault), so that its exit is not a failure. */
  killed = false

  async kill(signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    this.killed = true
    if (!this.running) return
    this.child!.kill(signal)
    await this.exited()
  }

  /** SIGTERM (a graceful drain), then SIGKILL after `timeoutMs`. */
  async stop(timeoutMs = 20_000): Promise<void> {
    if (!this.running) return
    this.child!.kill('SIGTERM')
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), timeoutMs)
    await this.exited()
    clearTimeout(timer)
  }

  memory(): MemorySample {
    const pid = this.pid
    const sample: MemorySample = { rss: this.running ? rssOf(pid) : undefined }
    try {
      const probe = JSON.parse(readFileSync(join(this.dirs.probe, `${pid}.json`), 'utf8')) as {
        heapUsed: number
        heapTotal: number
      }
      sample.heapUsed = probe.heapUsed
      sample.heapTotal = probe.heapTotal
    } catch {
      // The probe writes within a second of start; no heap figure before that.
    }
    return sample
  }

  /** The last lines of its log, each cut short (pino lines with stacks are long). */
  logTail(lines = 30): string {
    try {
      return readFileSync(this.logFile, 'utf8')
        .trimEnd()
        .split('\n')
        .slice(-lines)
        .map((l) => (l.length > 400 ? `${l.slice(0, 400)}…` : l))
        .join('\n')
    } catch {
      return ''
    }
  }
}

/** One-shot CLI command (migrate, apps create): its stdout, or an error with its stderr. */
async function runCli(args: string[], env: Record<string, string>): Promise<string> {
  try {
    const { stdout } = await execFileAsync(process.execPath, ['--import', 'tsx', CLI, ...args], {
      cwd: REPO_ROOT,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        HOME: process.env.HOME ?? tmpdir(),
        ...env,
      },
      timeout: 120_000,
    })
    return stdout
  } catch (error) {
    const e = error as { stderr?: string; message: string }
    throw new Error(`threadline ${args.join(' ')} failed: ${e.stderr || e.message}`)
  }
}

// ---- the stack -----------------------------------------------------------------------------------------

export interface StackOptions {
  /** New Posts per second the simulator makes. */
  simulatorRate: number
  writers?: number
  /** Simulator history (Posts made before start, what backfills page through). */
  historyPosts?: number
  /** Extra roles to start in their own processes (e.g. `delivery` once it exists). */
  extraRoles?: string[]
  logLevel?: string
  /** Overrides of any configuration variable, for every process. */
  env?: Record<string, string>
  /** Tuning of delivery, and of the API's stream, beside the stack's own. */
  tuning?: Pick<RoleTuning, 'api' | 'delivery'>
  /** Keep the temp dir (logs, data) after close, for a look after a failure. */
  keep?: boolean
}

export interface App {
  appId: string
  token: string
}

export interface Stack {
  dir: string
  pg: PrivatePostgres
  redis: PrivateRedis
  /** The configuration every process gets. */
  env: Record<string, string>
  simulatorUrl: string
  apiUrl: string
  simulator: ServiceProcess
  /** The ingest processes started: the first leads, the others stand by (killed ones stay listed). */
  ingests: ServiceProcess[]
  api: ServiceProcess
  writers: ServiceProcess[]
  extra: ServiceProcess[]
  /** A pool over the private Postgres for the harness's own checks. */
  db: Db
  prefix: string
  /** Every service process started (killed ones too), for memory figures and logs. */
  processes(): ServiceProcess[]
  startWriter(): ServiceProcess
  /** Starts another ingest (a standby while one leads). */
  startIngest(): ServiceProcess
  /** Starts another process of a role (e.g. a replacement `delivery`), listed in `extra`. */
  startRole(role: string): ServiceProcess
  createApp(name: string): Promise<App>
  sim<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T>
  callApi<T>(
    token: string,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>
  close(): Promise<void>
}

export const SIMULATOR_TOKEN = 'chaos-simulator-token'
/** How long a process may take to start: minutes on a loaded shared machine (tsx compiles first). */
const START_TIMEOUT_MS = 180_000

/**
 * Private Postgres and Redis, then `threadline migrate`, the simulator, the ingest, the writers and
 * the API as separate processes, wired as production wires them. Closes everything it started if
 * any step fails.
 */
export async function startStack(bin: Binaries, options: StackOptions): Promise<Stack> {
  const dir = mkdtempSync(join(tmpdir(), 'threadline-chaos-'))
  // mkdtemp makes it 0700; the postgres user must be able to pass through to its own data dir.
  if (bin.pgUser) chmodSync(dir, 0o711)
  const logs = join(dir, 'logs')
  const probe = join(dir, 'probe')
  mkdirSync(logs)
  mkdirSync(probe)
  const pgDir = join(dir, 'pg')
  mkdirSync(pgDir)
  const pg = new PrivatePostgres(bin, pgDir, await freePort())
  const redis = new PrivateRedis(bin, join(dir, 'redis'), await freePort())
  const simPort = await freePort()
  const apiPort = await freePort()
  const prefix = 'chaos'
  const simulatorUrl = `http://127.0.0.1:${simPort}`
  const apiUrl = `http://127.0.0.1:${apiPort}`
  const env: Record<string, string> = {
    DATABASE_URL: pg.url,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    LOG_LEVEL: options.logLevel ?? 'warn',
    HOST: '127.0.0.1',
    PORT: String(apiPort),
    UPSTREAM_URL: simulatorUrl,
    UPSTREAM_BEARER_TOKEN: SIMULATOR_TOKEN,
    SIMULATOR_HOST: '127.0.0.1',
    SIMULATOR_PORT: String(simPort),
    SIMULATOR_BEARER_TOKEN: SIMULATOR_TOKEN,
    SIMULATOR_RATE: String(options.simulatorRate),
    // No fixed ports on a shared machine: /metrics is not what is under test here.
    METRICS_PORT: '0',
    // The whole run stays on the `stored` stream, for the suite's count of repeats.
    STORED_STREAM_RETENTION_MS: '7200000',
    API_RATE_LIMITS: 'lookup:10000000,search:10000000,counts:10000000,rules:10000000',
    SHUTDOWN_TIMEOUT_MS: '10000',
    ...options.env,
  }
  const tuning: RoleTuning = {
    simulator: {
      // As X for most access levels: backfill_minutes refused, only recovery by search.
      grantBackfill: false,
      keepAliveMs: 2_000,
      world: { users: 500, historyPosts: options.historyPosts ?? 3_000 },
    },
    ingest: { stallMs: 10_000, reconcileMs: 10_000, leaseMs: 3_000 },
    // A killed writer's batch is taken over in seconds, not the production 30 s.
    writer: { lockDuration: 4_000, stalledInterval: 2_000 },
    api: {
      // Small enough that a reader that stops reading is cut off soon after the kernel's buffers
      // fill (about 4 MB on loopback), large enough for one dispatch of Posts without expansions.
      stream: { keepAliveMs: 2_000, maxBufferedBytes: 1024 * 1024, ...options.tuning?.api?.stream },
    },
    delivery: options.tuning?.delivery,
  }
  env.THREADLINE_TEST_TUNING = JSON.stringify(tuning)
  const dirs = { logs, probe }
  const all: ServiceProcess[] = []
  const spawnService = (name: string, args: string[], extraEnv: Record<string, string> = {}) => {
    const p = new ServiceProcess(name, args, { ...env, ...extraEnv }, dirs).start()
    all.push(p)
    return p
  }
  let writerCount = 0
  const startWriter = () => spawnService(`writer-${++writerCount}`, ['start', '--roles', 'writer'])
  let ingestCount = 0
  // At info: its log says when it leads and when it has started (the suite finds the leader so).
  const startIngest = () =>
    spawnService(`ingest-${++ingestCount}`, ['start', '--roles', 'ingest'], { LOG_LEVEL: 'info' })
  const roleCounts = new Map<string, number>()
  const startRole = (role: string) => {
    const n = (roleCounts.get(role) ?? 0) + 1
    roleCounts.set(role, n)
    return spawnService(n === 1 ? role : `${role}-${n}`, ['start', '--roles', role])
  }
  let db: Db | undefined

  const closeAll = async () => {
    await Promise.all(all.map((p) => p.stop(15_000)))
    await db?.destroy().catch(() => {})
    await redis.stop('SIGTERM').catch(() => {})
    await pg.stop('immediate').catch(() => {})
    if (!options.keep) rmSync(dir, { recursive: true, force: true })
  }

  try {
    await pg.init()
    await pg.start()
    await redis.start()
    await runCli(['migrate'], env)
    const simulator = spawnService('simulator', ['simulate'])
    const sim = async <T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> => {
      const res = await fetch(`${simulatorUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${SIMULATOR_TOKEN}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      })
      const text = await res.text()
      if (!res.ok) throw new Error(`simulator ${method} ${path}: ${res.status} ${text}`)
      return JSON.parse(text) as T
    }
    await waitFor('the simulator to listen', () => sim('GET', '/_sim/stats').then(() => true), {
      timeoutMs: START_TIMEOUT_MS,
      intervalMs: 200,
    }).catch((error: Error) => {
      throw new Error(`${error.message}\n${simulator.logTail()}`)
    })
    const writers = Array.from({ length: options.writers ?? 2 }, startWriter)
    const ingests = [startIngest()]
    const api = spawnService('api', ['start', '--roles', 'api'])
    const extra = (options.extraRoles ?? []).map(startRole)
    await waitFor(
      'the API to answer',
      async () => (await fetch(`${apiUrl}/2/tweets/search/recent?query=x`)).status === 401,
      { timeoutMs: START_TIMEOUT_MS, intervalMs: 200 },
    ).catch((error: Error) => {
      throw new Error(`${error.message}\n${api.logTail()}`)
    })
    db = createDb({ url: pg.url, poolMax: 4, applicationName: 'threadline-chaos' })
    const stackDb = db
    const callApi = async <T>(
      token: string,
      method: 'GET' | 'POST',
      path: string,
      body?: unknown,
    ) => {
      const res = await fetch(`${apiUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      })
      const text = await res.text()
      return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T }
    }
    return {
      dir,
      pg,
      redis,
      env,
      simulatorUrl,
      apiUrl,
      simulator,
      ingests,
      api,
      writers,
      extra,
      db: stackDb,
      prefix,
      processes: () => [...all],
      startWriter: () => {
        const w = startWriter()
        writers.push(w)
        return w
      },
      startIngest: () => {
        const p = startIngest()
        ingests.push(p)
        return p
      },
      startRole: (role) => {
        const p = startRole(role)
        extra.push(p)
        return p
      },
      async createApp(name) {
        const out = JSON.parse(await runCli(['apps', 'create', '--name', name], env)) as {
          app_id: string
          bearer_token: string
        }
        return { appId: out.app_id, token: out.bearer_token }
      },
      sim,
      callApi,
      close: closeAll,
    }
  } catch (error) {
    const tails = all
      .filter((p) => !p.running)
      .map((p) => `--- ${p.name} (exited) ---\n${p.logTail()}`)
      .join('\n')
    await closeAll()
    if (tails) (error as Error).message += `\n${tails}`
    throw error
  }
}
