import { spawn } from 'node:child_process'
import { readdirSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * `pnpm bench <name> [args…]` runs test/bench/<name>.ts in its own process. Each benchmark prints
 * progress as it goes and, as its last line, one JSON object of its figures with `ratio` among them.
 */
const here = dirname(fileURLToPath(import.meta.url))
const available = readdirSync(here)
  .filter((f) => f.endsWith('.ts') && f !== 'run.ts')
  .map((f) => f.slice(0, -3))
  .sort()
const [name, ...args] = process.argv.slice(2)
if (!name || !available.includes(name)) {
  console.error(`usage: pnpm bench <name> [args…]\nbenchmarks: ${available.join(', ')}`)
  process.exitCode = name ? 2 : 0
} else {
  const child = spawn(process.execPath, ['--import', 'tsx', join(here, `${name}.ts`), ...args], {
    stdio: 'inherit',
  })
  child.on('exit', (code, signal) => {
    process.exitCode = code ?? (signal ? 1 : 0)
  })
}
