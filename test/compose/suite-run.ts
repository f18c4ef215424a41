import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, afterEach } from 'vitest'
import { run, type Compose } from './compose.js'

/** Throws, saying so, when Docker does not answer `docker info`. */
export async function requireDocker(): Promise<void> {
  const docker = await run('docker', ['info', '--format', '{{.ServerVersion}}'], {
    env: process.env,
    timeoutMs: 30_000,
  }).catch((err: Error) => err)
  if (docker instanceof Error) {
    throw new Error(`pnpm test:compose needs Docker (docker info failed): ${docker.message}`)
  }
}

/**
 * What a compose suite keeps beside its stack: a work folder holding the empty env file compose
 * reads, the timings printed as one JSON line at the end, and whether anything failed. When
 * something did, the services' logs are saved in the folder; otherwise the folder is removed.
 */
export class SuiteRun {
  readonly workDir: string
  readonly emptyEnv: string
  readonly timings: Record<string, number> = {}
  private failed = false

  /** `name`: the suite's, in its folder's name, its failure message and its timings' line. */
  constructor(private readonly name: string) {
    this.workDir = mkdtempSync(join(tmpdir(), `threadline-${name}-`))
    this.emptyEnv = join(this.workDir, 'empty.env')
    writeFileSync(this.emptyEnv, '')
  }

  /** Runs a setup step; when it fails, the run counts as failed (the logs are kept). */
  async step<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      this.failed = true
      throw err
    }
  }

  /**
   * Registers the suite's end: a failed test marks the run; after the last, `logsOf`'s logs are
   * saved if anything failed, `takeDown` removes the stack (its ms are down_ms), and the folder
   * goes unless something failed.
   */
  registerEnd(logsOf: Compose, takeDown: () => Promise<number>, timeoutMs: number): void {
    afterEach((context) => {
      if (context.task.result?.state === 'fail') this.failed = true
    })
    afterAll(async () => {
      const logs = join(this.workDir, 'logs')
      if (this.failed) {
        await logsOf.saveLogs(logs).catch(() => {})
        process.stdout.write(`\n${this.name} suite failed: the services' logs are in ${logs}\n`)
      }
      this.timings.down_ms = await takeDown()
      if (!this.failed) rmSync(this.workDir, { recursive: true, force: true })
      process.stdout.write(`${JSON.stringify({ [this.name]: this.timings })}\n`)
    }, timeoutMs)
  }
}
