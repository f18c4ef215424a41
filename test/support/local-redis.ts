import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'

/** A private redis-server on a free port, for tests that stop it or fill it; never the shared one. */
export interface LocalRedis {
  readonly url: string
  /** Starts it (again, on the same port). */
  start(): Promise<void>
  /** Kills it (SIGKILL) and waits for it to exit. */
  stop(): Promise<void>
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const p = (srv.address() as { port: number }).port
      srv.close(() => resolve(p))
    })
  })
}

/** A redis-server that keeps nothing on disk, with `args` added to its command line. */
export async function localRedis(args: readonly string[] = []): Promise<LocalRedis> {
  const port = await freePort()
  let child: ChildProcess | undefined
  return {
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const started = spawn(
        'redis-server',
        [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          ...args,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'] },
      )
      child = started
      await new Promise<void>((resolve, reject) => {
        let out = ''
        started.stdout!.on('data', (chunk: Buffer) => {
          out += chunk.toString('utf8')
          if (out.includes('Ready to accept connections')) resolve()
        })
        started.once('exit', (code) =>
          reject(new Error(`redis-server exited with ${code}:\n${out}`)),
        )
      })
    },
    async stop() {
      const running = child
      child = undefined
      if (!running || running.exitCode !== null) return
      await new Promise<void>((resolve) => {
        running.once('exit', () => resolve())
        running.kill('SIGKILL')
      })
    },
  }
}
