import { execFile } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface Run {
  stdout: string
  stderr: string
  ms: number
}

/** Runs a command to the end; rejects with its output when it fails or outlives timeoutMs. */
export function run(
  file: string,
  args: string[],
  options: { env: NodeJS.ProcessEnv; timeoutMs: number; input?: string },
): Promise<Run> {
  const started = Date.now()
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args,
      {
        cwd: REPO_ROOT,
        env: options.env,
        timeout: options.timeoutMs,
        killSignal: 'SIGKILL',
        maxBuffer: 256 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        const ms = Date.now() - started
        if (error) {
          const why = error.killed ? `killed after ${options.timeoutMs} ms` : error.message
          reject(new Error(`${file} ${args.join(' ')}: ${why}\n${stderr.slice(-4000)}`))
        } else {
          resolve({ stdout, stderr, ms })
        }
      },
    )
    child.stdin?.end(options.input ?? '')
  })
}

/** The environment compose gets: the caller's Docker settings, none of its Threadline ones. */
function composeEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const kept = Object.entries(process.env).filter(
    ([name]) =>
      ['PATH', 'HOME', 'TMPDIR', 'XDG_RUNTIME_DIR'].includes(name) || name.startsWith('DOCKER_'),
  )
  return { ...Object.fromEntries(kept), ...extra }
}

export interface ServiceState {
  service: string
  container: string
  exitCode: number
  running: boolean
  finishedAt: number
}

/**
 * `docker compose` for one project of the repository's docker-compose.yml, with the simulator
 * profile, an empty env file (a developer's `.env` does not change what is tested) and only the
 * variables given.
 */
export class Compose {
  private readonly env: NodeJS.ProcessEnv

  constructor(
    readonly project: string,
    private readonly emptyEnvFile: string,
    variables: Record<string, string> = {},
  ) {
    this.env = composeEnv(variables)
  }

  run(args: string[], timeoutMs = 120_000, input?: string): Promise<Run> {
    const base = ['compose', '--project-name', this.project, '--profile', 'simulator']
    const files = ['--file', 'docker-compose.yml', '--env-file', this.emptyEnvFile]
    return run('docker', [...base, ...files, ...args], { env: this.env, timeoutMs, input })
  }

  docker(args: string[], timeoutMs = 60_000): Promise<Run> {
    return run('docker', args, { env: this.env, timeoutMs })
  }

  /** `psql` in the Postgres container: one row per line, columns split on tabs. */
  async sql(query: string): Promise<string[][]> {
    const { stdout } = await this.run(
      ['exec', '-T', 'postgres', 'psql', '-U', 'threadline', '-d', 'threadline', '-AtF', '\t'],
      60_000,
      `${query};\n`,
    )
    return stdout
      .split('\n')
      .filter((line) => line !== '')
      .map((line) => line.split('\t'))
  }

  /**
   * The Post ids on the `stored` stream, a repeat as often as it was published: a script in Redis
   * unpacks the entries (fields `post:<id>`, see packages/redis/src/stored-stream.ts) and answers
   * only the ids, not the bodies.
   */
  async storedStreamPostIds(prefix = 'threadline'): Promise<string[]> {
    const script = `local ids = {}
for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+')) do
  local fields = entry[2]
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 5) == 'post:' then table.insert(ids, string.sub(fields[i], 6)) end
  end
end
return ids`
    const args = ['exec', '-T', 'redis', 'redis-cli', '--raw', 'EVAL', script, '1']
    const { stdout } = await this.run([...args, `${prefix}:stored`], 120_000)
    return stdout.split('\n').filter((line) => /^\d+$/.test(line))
  }

  /** An admin request to the simulator, from inside its own container (its port is not published). */
  async simulator<T>(method: string, path: string, body?: unknown): Promise<T> {
    const script = [
      'const [method, path, body] = process.argv.slice(1)',
      "fetch('http://127.0.0.1:3100' + path, { method, body: body || undefined, headers: {",
      "  authorization: 'Bearer ' + process.env.SIMULATOR_BEARER_TOKEN,",
      "  'content-type': 'application/json' } })",
      '  .then(async (r) => { process.stdout.write(await r.text()); if (!r.ok) process.exitCode = 1 })',
    ].join('\n')
    const args = ['exec', '-T', 'simulator', 'node', '-e', script, method, path]
    const { stdout } = await this.run(body === undefined ? args : [...args, JSON.stringify(body)])
    return JSON.parse(stdout) as T
  }

  /** The containers of the project, stopped ones too, with how each ended. */
  async states(): Promise<ServiceState[]> {
    const { stdout } = await this.run(['ps', '--all', '--quiet'])
    const ids = stdout.split('\n').filter(Boolean)
    if (ids.length === 0) return []
    const format =
      '{{index .Config.Labels "com.docker.compose.service"}}\t{{.Name}}\t{{.State.ExitCode}}\t' +
      '{{.State.Running}}\t{{.State.FinishedAt}}'
    const inspected = await this.docker(['inspect', '--format', format, ...ids])
    return inspected.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const [service, name, code, running, finished] = line.split('\t')
        return {
          service: service!,
          container: name!.replace(/^\//, ''),
          exitCode: Number(code),
          running: running === 'true',
          finishedAt: Date.parse(finished!),
        }
      })
  }

  /** Each container's log (stdout and stderr), by container name. */
  async logs(): Promise<Map<string, string>> {
    const logs = new Map<string, string>()
    const { stdout } = await this.run(['ps', '--all', '--format', '{{.Name}}'])
    for (const name of stdout.split('\n').filter(Boolean)) {
      const { stdout: out, stderr } = await this.docker(['logs', name], 60_000)
      logs.set(name, out + stderr)
    }
    return logs
  }

  async saveLogs(dir: string): Promise<void> {
    mkdirSync(dir, { recursive: true })
    for (const [name, text] of await this.logs()) writeFileSync(join(dir, `${name}.log`), text)
  }
}

/** One log line that reads as an error or a warning, and where it came from. */
export interface Complaint {
  container: string
  line: string
}

/**
 * Lines that report an error or a warning: pino's JSON at level warn (40) or above from our
 * services, `WARNING`/`ERROR`/`FATAL`/`PANIC` from Postgres and Redis, `WARN:` from pgBackRest, and
 * any other line that names itself a warning or an error.
 */
export function complaints(container: string, log: string): Complaint[] {
  const found: Complaint[] = []
  for (const line of log.split('\n')) {
    if (line.trim() === '') continue
    let level: number | undefined
    if (line.startsWith('{')) {
      try {
        level = (JSON.parse(line) as { level?: number }).level
      } catch {
        // not JSON after all: judged as text below
      }
    }
    const bad =
      level !== undefined
        ? level >= 40
        : /\b(WARNING|ERROR|FATAL|PANIC)\b|\bWARN:|\b[Ww]arn(ing)?:|\b[Ee]rror:/.test(line)
    if (bad) found.push({ container, line })
  }
  return found
}
