import { pino, type Logger, type LoggerOptions } from 'pino'

export type { Logger }

/** Paths whose values never reach a log line. */
export const redactPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'authorization',
  'token',
  'bearer_token',
  'consumer_secret',
  'secret',
  'password',
  '*.token',
  '*.secret',
  '*.password',
  '*.authorization',
]

/** Hides the password of a URL such as postgres://user:pass@host/db. */
export function redactUrl(value: string): string {
  try {
    const url = new URL(value)
    if (url.password) url.password = '***'
    return url.toString()
  } catch {
    return value
  }
}

/** Where a logger writes its JSON lines: stdout unless given (a terminal renderer, say). */
export interface LogDestination {
  write(line: string): void
}

/** The one root logger of a process; components take `logger.child({ component })`. */
export function createLogger(
  options: { level?: string; name?: string; destination?: LogDestination } = {},
): Logger {
  const opts: LoggerOptions = {
    level: options.level ?? 'info',
    redact: { paths: redactPaths, censor: '[redacted]' },
    base: { service: options.name ?? 'threadline' },
    timestamp: pino.stdTimeFunctions.isoTime,
  }
  return options.destination ? pino(opts, options.destination) : pino(opts)
}

/** A logger that writes nothing, for tests and quiet commands. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' })
}
