import { isId } from '@threadline/domain'

/** Command-line output: results on stdout, progress and messages on stderr. */
export const out = (line: string) => process.stdout.write(`${line}\n`)
export const err = (line: string) => process.stderr.write(`${line}\n`)

export class UsageError extends Error {
  override name = 'UsageError'
}

/**
 * The value of `--app`: an app id (1-19 digits). A missing one is refused only when `required`; a
 * malformed one always, saying what was given, since "required" would send the user looking for a
 * flag they did pass.
 */
export function appOption(value: string | undefined, usage: string, required: true): string
export function appOption(
  value: string | undefined,
  usage: string,
  required: false,
): string | undefined
export function appOption(value: string | undefined, usage: string, required: boolean) {
  if (value === undefined || value === '') {
    if (required) throw new UsageError(`--app ID is required\n${usage}`)
    return undefined
  }
  if (!isId(value)) {
    throw new UsageError(`--app ${JSON.stringify(value)} is not an app id (1-19 digits)\n${usage}`)
  }
  return value
}

/** A one-line progress display, redrawn in place on a terminal and silent elsewhere. */
export class Progress {
  private last = 0
  private readonly tty = Boolean(process.stderr.isTTY)

  update(fraction: number, text: string, force = false): void {
    if (!this.tty) return
    const now = Date.now()
    if (!force && now - this.last < 100) return
    this.last = now
    const width = 30
    const filled = Math.round(Math.max(0, Math.min(1, fraction)) * width)
    const bar = `[${'#'.repeat(filled)}${' '.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}%`
    process.stderr.write(`\r\x1b[2K${bar} ${text}`)
  }

  done(): void {
    if (this.tty) process.stderr.write('\r\x1b[2K')
  }
}
