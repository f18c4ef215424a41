import type { Logger } from '@threadline/logger'

export interface Service {
  start(): Promise<void>
  /** Releases everything the service holds. Safe to call twice. */
  close(): Promise<void>
}

/** Wraps a close function so that a second call waits for the first instead of running again. */
export function once(close: () => Promise<void>): () => Promise<void> {
  let closing: Promise<void> | undefined
  return () => (closing ??= close())
}

/** Runs `fn`, giving up (and rejecting) after `ms`. */
export async function withDeadline<T>(ms: number, what: string, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}

/** Waits `ms`, or less: resolves at once when `signal` aborts (the caller then sees it aborted). */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve()
    const done = () => {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', done, { once: true })
  })
}

export interface Repeating {
  /** No further run starts (one under way finishes on its own). */
  stop(): void
}

/**
 * Runs `task` every `ms`, counted from the end of the previous run (never two at once), until
 * stop(). A rejection goes to `onError` and the next run comes all the same.
 */
export function repeatEvery(
  ms: number,
  task: () => Promise<unknown>,
  onError: (err: unknown) => void,
): Repeating {
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  const next = () => {
    timer = setTimeout(() => {
      void task()
        .catch(onError)
        .finally(() => {
          if (!stopped) next()
        })
    }, ms)
  }
  next()
  return {
    stop() {
      stopped = true
      clearTimeout(timer)
    },
  }
}

/** A repeat of the first signal this soon after it is a wrapper's relayed copy (runUntilSignal). */
const RELAYED_WITHIN_MS = 1_000

/**
 * Starts the services, then on SIGTERM/SIGINT closes them in reverse order under a deadline. No
 * process.exit on the normal path: resources are released and the event loop drains. A watchdog
 * (unref'd, so it never keeps the process alive) ends a process that still has not drained.
 *
 * A signal that comes while the services close is ignored, not left to Node's default (which
 * ends the process at once, jobs and connections half closed). Ctrl-C under a wrapper that relays
 * signals (`tsx`, as `pnpm start` runs) delivers SIGINT twice, once from the terminal and once
 * relayed, milliseconds apart: that copy is logged at debug level only (a warning there made every
 * Ctrl-C look like a second one). Any other signal while closing (a second Ctrl-C, an orchestrator
 * repeating SIGTERM) gets a warning that says what is going on. The watchdog still bounds the
 * shutdown, and SIGKILL still ends it at once.
 */
export async function runUntilSignal(
  services: Service[],
  logger: Logger,
  shutdownTimeoutMs: number,
): Promise<void> {
  let stopping: { signal: string; atMs: number } | undefined
  const stop = async (signal: string) => {
    if (stopping) {
      if (signal === stopping.signal && Date.now() - stopping.atMs < RELAYED_WITHIN_MS) {
        logger.debug(
          { signal },
          'signal delivered again (relayed by a wrapper); already shutting down',
        )
      } else {
        logger.warn(
          { signal },
          'already shutting down; in-flight work is finishing (SIGKILL ends the process at once)',
        )
      }
      return
    }
    stopping = { signal, atMs: Date.now() }
    logger.info({ signal }, 'shutting down')
    const watchdog = setTimeout(() => {
      logger.error('shutdown deadline passed; exiting')
      process.exit(1)
    }, shutdownTimeoutMs + 5_000)
    watchdog.unref()
    for (const service of [...services].reverse()) {
      try {
        await withDeadline(shutdownTimeoutMs, 'close', () => service.close())
      } catch (err) {
        logger.error({ err }, 'service did not close cleanly')
        process.exitCode = 1
      }
    }
    logger.info('stopped')
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  for (const service of services) await service.start()
}
