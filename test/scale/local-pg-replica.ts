import { execFile } from 'node:child_process'
import { chown, mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)
const BIN = '/usr/lib/postgresql/15/bin'

export interface LocalPgReplica {
  /** postgres://…/postgres on the primary. */
  primaryUrl: string
  /** postgres://…/postgres on the streaming replica (read-only, hot standby). */
  replicaUrl: string
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Postgres refuses to run as root: as root, run its tools as the postgres user. */
async function pgTool(tool: string, args: string[]): Promise<string> {
  const asRoot = process.getuid?.() === 0
  const [cmd, argv] = asRoot
    ? ['runuser', ['-u', 'postgres', '--', join(BIN, tool), ...args]]
    : [join(BIN, tool), args]
  const { stdout } = await run(cmd, argv, { timeout: 120_000 })
  return stdout
}

/**
 * A primary and a streaming replica (`pg_basebackup -R`) of Postgres 15 on free loopback ports,
 * in a temp directory this owns; `stop()` stops exactly these two servers (pg_ctl on their data
 * directories) and removes it. Never the shared Postgres on 5432.
 */
export async function startLocalPgReplica(): Promise<LocalPgReplica> {
  const dir = await mkdtemp(join(tmpdir(), 'threadline-pg-replica-'))
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres'])
    const { stdout: gid } = await run('id', ['-g', 'postgres'])
    await chown(dir, Number(stdout.trim()), Number(gid.trim()))
  }
  const primaryDir = join(dir, 'primary')
  const replicaDir = join(dir, 'replica')
  const started: string[] = []
  const [primaryPort, replicaPort] = [await freePort(), await freePort()]
  // Test speed over durability; the socket lives in our directory, not /var/run/postgresql.
  const serverOptions = (port: number) =>
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off ` +
    '-c full_page_writes=off -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on ' +
    '-c wal_receiver_status_interval=1s -c hot_standby_feedback=on'
  const stop = async () => {
    for (const data of started.reverse()) {
      await pgTool('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined)
    }
    await rm(dir, { recursive: true, force: true })
  }
  try {
    await pgTool('initdb', ['-D', primaryDir, '-U', 'postgres', '-A', 'trust', '--no-sync'])
    await pgTool('pg_ctl', [
      '-D',
      primaryDir,
      '-o',
      serverOptions(primaryPort),
      '-l',
      join(dir, 'primary.log'),
      '-w',
      'start',
    ])
    started.push(primaryDir)
    await pgTool('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      replicaDir,
      '-R',
      '-X',
      'stream',
      '--no-sync',
    ])
    await pgTool('pg_ctl', [
      '-D',
      replicaDir,
      '-o',
      serverOptions(replicaPort),
      '-l',
      join(dir, 'replica.log'),
      '-w',
      'start',
    ])
    started.push(replicaDir)
  } catch (err) {
    await stop()
    throw err
  }
  return {
    primaryUrl: `postgres://postgres@127.0.0.1:${primaryPort}/postgres`,
    replicaUrl: `postgres://postgres@127.0.0.1:${replicaPort}/postgres`,
    stop,
  }
}
