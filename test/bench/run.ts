import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseFigures, summarizeRuns, type Figures } from './lib/runs.js'

/**
 * `pnpm bench <name> [--runs N] [args…]` runs test/bench/<name>.ts in its own process. Each
 * benchmark prints progress as it goes and, as its last line, one JSON object of its figures with
 * `ratio` among them. `--runs N` (anywhere among the arguments) runs it N times, one after
 * another, each against its own baseline, and ends with one JSON line of its own: the median
 * ratio, its spread and how many runs reached the benchmark's target (see lib/runs.ts).
 *
 * package.json starts this file with node itself (no tsx CLI process in between) and
 * `--no-memory-reducer`: it idles while the benchmark runs, and V8's memory reducer would otherwise
 * run its GCs here inside a measured window. See test/bench/README.md.
 */
const here = dirname(fileURLToPath(import.meta.url))
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
  .map((f) => f.slice(0, -3))
  .sort()
const [name, ...rest] = process.argv.slice(2)
/** `--runs N` or `--runs=N`, anywhere after the name; the rest are the benchmark's arguments. */
function takeRuns(argv: readonly string[]): { runsArg: string | undefined; args: string[] } {
  const at = argv.findIndex((a) => a === '--runs' || a.startsWith('--runs='))
  if (at < 0) return { runsArg: undefined, args: [...argv] }
  const inline = argv[at]!.startsWith('--runs=')
  const runsArg = inline ? argv[at]!.slice('--runs='.length) : (argv[at + 1] ?? '')
  return { runsArg, args: [...argv.slice(0, at), ...argv.slice(at + (inline ? 1 : 2))] }
}
const { runsArg, args } = takeRuns(rest)
const runs = runsArg === undefined ? 1 : Number(runsArg)

let current: ChildProcess | undefined
let stopped = false

/** Runs the benchmark once, its output passed through; resolves with its exit code and last line. */
function runOnce(): Promise<{ code: number; last: string }> {
  return new Promise((resolve) => {
    const child = (current = spawn(
      process.execPath,
      ['--import', 'tsx', join(here, `${name}.ts`), ...args],
      {
        stdio: ['inherit', runs > 1 ? 'pipe' : 'inherit', 'inherit'],
      },
    ))
    let last = ''
    if (child.stdout) {
      createInterface({ input: child.stdout }).on('line', (line) => {
        process.stdout.write(`${line}\n`)
        if (line.trim() !== '') last = line
      })
    }
    // 'close': after the child's output has all been read, so `last` is its last line.
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), last }))
  })
}

if (!name || !available.includes(name)) {
  console.error(`usage: pnpm bench <name> [--runs N] [args…]\nbenchmarks: ${available.join(', ')}`)
  process.exitCode = name ? 2 : 0
} else if (!Number.isInteger(runs) || runs < 1) {
  console.error(`--runs takes a whole number of runs, at least 1 (got '${runsArg}')`)
  process.exitCode = 2
} else if (runs === 1) {
  process.exitCode = (await runOnce()).code
} else {
  // The benchmark's output comes through this process: stay until it has exited, then stop. Ctrl-C
  // reaches it from the terminal as well; a SIGTERM sent to this process alone is passed on.
  process.on('SIGINT', () => (stopped = true))
  process.on('SIGTERM', () => {
    stopped = true
    current?.kill('SIGTERM')
  })
  const figures: Figures[] = []
  for (let i = 1; i <= runs; i++) {
    console.log(`== ${name}: run ${i} of ${runs}`)
    const { code, last } = await runOnce()
    const parsed = parseFigures(last)
    if (stopped) {
      console.error(`stopped during run ${i}`)
      process.exitCode = 130
      break
    }
    if (code !== 0 || !parsed) {
      console.error(
        code !== 0
          ? `run ${i} failed (exit ${code}); stopping`
          : `run ${i} did not end with a JSON line with a numeric ratio; stopping`,
      )
      process.exitCode = code || 1
      break
    }
    figures.push(parsed)
    console.log(`== ${name}: run ${i} of ${runs}: ratio ${parsed.ratio}`)
  }
  if (process.exitCode === undefined) {
    const summary = summarizeRuns(name, figures)
    console.log(
      `${name}: ${runs} runs, ratio median ${summary.ratio} (${summary.ratio_min}–${summary.ratio_max})` +
        (summary.at_target === undefined
          ? ''
          : `, ${summary.at_target} of ${runs} at or above the target ${summary.target_ratio}`),
    )
    console.log(JSON.stringify(summary))
  }
}
