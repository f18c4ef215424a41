import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { withDeadline } from './index.js'

const child = fileURLToPath(new URL('./fixtures/signal-child.ts', import.meta.url))

describe('runUntilSignal', () => {
  it('finishes closing when a second signal comes while it closes', async () => {
    const proc = spawn(process.execPath, ['--import', 'tsx', child], {
      stdio: ['pipe', 'pipe', 'inherit'],
    })
    const lines: string[] = []
    const waiters: Array<{ test: (line: string) => boolean; resolve: () => void }> = []
    createInterface({ input: proc.stdout }).on('line', (line) => {
      lines.push(line)
      for (const w of waiters.filter((w) => w.test(line))) {
        waiters.splice(waiters.indexOf(w), 1)
        w.resolve()
      }
    })
    const exited = once(proc, 'exit') as Promise<[number | null, NodeJS.Signals | null]>
    // Each step waits for the line that shows the child got there, or fails after 10 s.
    const seen = (test: (line: string) => boolean, what: string) =>
      withDeadline(10_000, what, () =>
        Promise.race([
          lines.some(test)
            ? Promise.resolve()
            : new Promise<void>((resolve) => waiters.push({ test, resolve })),
          exited.then(() => {
            throw new Error(`exited before ${what}: ${lines.join('\n')}`)
          }),
        ]),
      )
    try {
      await seen((l) => l === 'marker:started', 'start')
      proc.kill('SIGINT')
      await seen((l) => l === 'marker:closing', 'close')
      // Ctrl-C under a relaying wrapper (tsx) or a repeated SIGTERM: the same signal again.
      proc.kill('SIGINT')
      proc.kill('SIGTERM')
      await seen((l) => l.includes('already shutting down') && l.includes('SIGTERM'), 'warning')
      proc.stdin.write('finish\n')
      const [code, signal] = await exited
      expect({ code, signal }).toEqual({ code: 0, signal: null })
      expect(lines).toContain('marker:closed')
      expect(lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true)
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
    }
  })
})
