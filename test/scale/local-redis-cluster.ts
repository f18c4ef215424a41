import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { waitFor } from '@threadline/testing'

const run = promisify(execFile)

export interface LocalRedisCluster {
  nodes: Array<{ host: string; port: number }>
  /** `host:port,host:port,…`, as REDIS_CLUSTER_NODES takes it. */
  seeds: string
  /** redis-cli against one node (for assertions such as CLUSTER KEYSLOT). */
  cli(port: number, ...args: string[]): Promise<string>
  stop(): Promise<void>
}

/** True when nothing listens on `port` of the loopback address. */
async function portFree(port: number): Promise<boolean> {
  const server = createServer()
  return new Promise((resolve) => {
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/** A port P such that P and P + 10000 (the cluster bus) are both free. */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 25_000)
    if (taken.has(port) || taken.has(port + 10_000)) continue
    if ((await portFree(port)) && (await portFree(port + 10_000))) return port
  }
  throw new Error('no free loopback port pair for a Redis Cluster node')
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = once(child, 'exit')
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000)
  await exited
  clearTimeout(timer)
}

/**
 * A Redis Cluster of `size` masters (no replicas) of local `redis-server` processes on free
 * loopback ports, in a temp directory this owns. `stop()` ends exactly these processes and removes
 * the directory. Never the shared Redis on 6379.
 */
export async function startLocalRedisCluster(size = 3): Promise<LocalRedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), 'threadline-redis-cluster-'))
  const children: ChildProcess[] = []
  const ports: number[] = []
  const taken = new Set<number>()
  const cli = async (port: number, ...args: string[]) =>
    (await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args])).stdout.trim()
  const stop = async () => {
    await Promise.all(children.map(stopProcess))
    await rm(dir, { recursive: true, force: true })
  }
  try {
    for (let i = 0; i < size; i++) {
      const port = await freeClusterPort(taken)
      taken.add(port)
      ports.push(port)
      const child = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(dir, `nodes-${port}.conf`),
          '--cluster-node-timeout',
          '2000',
          '--dir',
          dir,
          '--save',
          '',
          '--appendonly',
          'no',
          '--daemonize',
          'no',
          // The posts queue and the stored stream must not lose keys to eviction (BullMQ's rule).
          '--maxmemory-policy',
          'noeviction',
        ],
        { stdio: 'ignore' },
      )
      children.push(child)
    }
    for (const port of ports) {
      await waitFor(`redis-server on ${port}`, async () => (await cli(port, 'ping')) === 'PONG', {
        timeoutMs: 15_000,
      })
    }
    await run('redis-cli', [
      '--cluster',
      'create',
      ...ports.map((p) => `127.0.0.1:${p}`),
      '--cluster-replicas',
      '0',
      '--cluster-yes',
    ])
    for (const port of ports) {
      await waitFor(
        `cluster state ok on ${port}`,
        async () => (await cli(port, 'cluster', 'info')).includes('cluster_state:ok'),
        { timeoutMs: 20_000 },
      )
    }
  } catch (err) {
    await stop()
    throw err
  }
  const nodes = ports.map((port) => ({ host: '127.0.0.1', port }))
  return { nodes, seeds: nodes.map((n) => `${n.host}:${n.port}`).join(','), cli, stop }
}
