import type { LogDestination } from '@threadline/logger'

/**
 * What a person sees while `threadline start` runs on a terminal: log lines made readable
 * (time, level, role, message, a few fields) and one status line kept at the bottom, redrawn in
 * place. Off a terminal (compose, CI) logs stay pino's JSON lines; see README "Quick start".
 */

const LEVELS: Record<number, string> = {
  10: 'trace',
  20: 'debug',
  30: 'info ',
  40: 'WARN ',
  50: 'ERROR',
  60: 'FATAL',
}
/** Members every line carries, shown elsewhere in the line or not at all. */
const SKIPPED = new Set(['level', 'time', 'pid', 'hostname', 'service', 'msg', 'role', 'component'])
const MAX_FIELD_CHARS = 80

export interface Terminal {
  /** For createLogger: renders each JSON line above the status line. */
  destination: LogDestination
  /** Replaces the status line. */
  status(text: string): void
  /** Prints lines for people above the status line. */
  print(text: string): void
  /** Removes the status line (at exit). */
  clear(): void
}

/** One JSON log line as a person reads it; the line as it was when it is not JSON. */
export function renderLogLine(line: string, color: boolean): string {
  let record: Record<string, unknown>
  try {
    record = JSON.parse(line) as Record<string, unknown>
  } catch {
    return line.trimEnd()
  }
  const level = LEVELS[Number(record.level)] ?? String(record.level)
  const time = typeof record.time === 'string' ? record.time.slice(11, 19) : ''
  const who = [...new Set([record.role, record.component])]
    .filter((v) => typeof v === 'string')
    .join('/')
  const fields: string[] = []
  for (const [key, value] of Object.entries(record)) {
    if (SKIPPED.has(key) || value === undefined) continue
    const text =
      key === 'err' && value && typeof value === 'object'
        ? String((value as { message?: unknown }).message ?? JSON.stringify(value))
        : typeof value === 'string'
          ? value
          : JSON.stringify(value)
    fields.push(
      `${key}=${text.length > MAX_FIELD_CHARS ? `${text.slice(0, MAX_FIELD_CHARS)}…` : text}`,
    )
  }
  const paint = (code: string, text: string) => (color ? `\x1b[${code}m${text}\x1b[0m` : text)
  const levelText =
    Number(record.level) >= 50
      ? paint('31', level)
      : Number(record.level) >= 40
        ? paint('33', level)
        : paint('2', level)
  return [
    paint('2', time),
    levelText,
    who ? paint('36', who) : '',
    String(record.msg ?? ''),
    fields.length > 0 ? paint('2', fields.join(' ')) : '',
  ]
    .filter(Boolean)
    .join(' ')
}

export function createTerminal(stream: NodeJS.WriteStream): Terminal {
  let current = ''
  const color = stream.hasColors?.() ?? false
  const fit = (text: string) => {
    const width = stream.columns || 80
    return text.length > width - 1 ? `${text.slice(0, width - 2)}…` : text
  }
  const redraw = () => {
    if (current) stream.write(`\x1b[2K\r${color ? `\x1b[1m${fit(current)}\x1b[0m` : fit(current)}`)
  }
  const print = (text: string) => {
    stream.write(`\x1b[2K\r${text}\n`)
    redraw()
  }
  return {
    destination: { write: (line) => print(renderLogLine(line, color)) },
    status(text) {
      current = text
      redraw()
    },
    print,
    clear() {
      if (current) stream.write('\x1b[2K\r')
      current = ''
    },
  }
}
