import { spawn } from 'node:child_process'
import { once } from 'node:events'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { withDeadline } from './index.js'

const child = fileURLToPath(new URL('./fixtures/signal-child.ts', import.meta.url))

/** The child, its stdout lines, and `seen`: waits for a line (10 s deadline, or fails if it exits). */
function startChild() {
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
  const kill = () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL')
  }
  return { proc, lines, exited, seen, kill }
}

describe('runUntilSignal', () => {
  it('finishes closing when a second signal comes while it closes', async () => {
    const { proc, lines, exited, seen, kill } = startChild()
    try {
      await seen((l) => l === 'marker:started', 'start')
      proc.kill('SIGINT')
      await seen((l) => l === 'marker:closing', 'close')
      // A second Ctrl-C, or an orchestrator's repeated SIGTERM.
      proc.kill('SIGTERM')
      await seen((l) => l.includes('already shutting down') && l.includes('SIGTERM'), 'warning')
      proc.stdin.write('finish\n')
      const [code, signal] = await exited
      expect({ code, signal }).toEqual({ code: 0, signal: null })
      expect(lines).toContain('marker:closed')
      expect(lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true)
    } finally {
      kill()
    }
  })

  it("takes a wrapper's relayed copy of the signal without a warning (Ctrl-C under tsx)", async () => {
    const { proc, lines, exited, seen, kill } = startChild()
    try {
      await seen((l) => l === 'marker:started', 'start')
      // The terminal's SIGINT, then the wrapper's relayed copy once the first has been taken
      // (sent at once, the two could merge into one pending signal and prove nothing).
      proc.kill('SIGINT')
      await seen((l) => l === 'marker:closing', 'close')
      proc.kill('SIGINT')
      await seen((l) => l.includes('relayed by a wrapper'), 'the relayed copy (debug)')
      proc.stdin.write('finish\n')
      const [code] = await exited
      expect(code).toBe(0)
      expect(lines.filter((l) => l.includes('"level":40'))).toEqual([])
      expect(lines.some((l) => l.includes('"msg":"stopped"'))).toBe(true)
    } finally {
      kill()
    }
  })
})
