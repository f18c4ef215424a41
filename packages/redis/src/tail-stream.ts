import type { Logger } from '@threadline/logger'
import { duplicateRedis, type Redis } from './connection.js'

/** Entries as XREAD and XRANGE return them: `[streamId, [field, value, …]]`. */
export type RawEntries = Array<[string, string[]]>

export interface StreamTail {
  /** Resolves once the tail position is known: every entry added after this is delivered. */
  ready: Promise<void>
  /** The id of the last entry handed over (or the tail it started from). */
  readonly lastId: string
  close(): Promise<void>
}

/**
 * Follows a Redis stream from its tail on a dedicated connection (XREAD BLOCK holds it), so the
 * caller's own connection stays free. Reconnects for as long as it is open, resuming after the
 * last id handed over, so a Redis restart loses nothing the stream still holds. `onEntries` gets
 * each non-empty read in stream order; the next XREAD waits for the promise it returns.
 */
export function tailStream(
  redis: Redis,
  key: string,
  options: {
    /** Names the connection and the log lines. */
    name: string
    /** Entries per XREAD. */
    count: number
    /** How long one XREAD blocks before asking again. */
    blockMs: number
    logger?: Logger
    onEntries: (raw: RawEntries) => Promise<void> | void
  },
): StreamTail {
  const { name, count, blockMs } = options
  const log = options.logger?.child({ component: name })
  // Blocking reads wait forever for a reconnect (worker-style), never failing fast.
  const conn = duplicateRedis(redis, name)
  conn.on('error', (err) => log?.debug({ err }, `${name} connection error`))
  let closed = false
  let lastId: string | undefined
  let markReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (markReady = resolve))
  // Ends the loop's wait on a command at once when closed: a command sent while the connection
  // was not ready yet (Redis down since the start) neither answers nor fails on disconnect().
  // Not Promise.race against one promise of the close: each race leaves a reaction on that promise
  // until it settles, and the reaction holds the race's result, so every reply read would stay in
  // memory for the life of the tail.
  const waiting = new Set<() => void>()
  const unlessClosed = <T>(command: Promise<T>): Promise<T | undefined> =>
    new Promise<T | undefined>((resolve, reject) => {
      const onClose = () => resolve(undefined)
      if (closed) onClose()
      else waiting.add(onClose)
      command.then(
        (value) => {
          waiting.delete(onClose)
          resolve(value)
        },
        (err: unknown) => {
          waiting.delete(onClose)
          reject(err)
        },
      )
    })

  const run = async () => {
    let failures = 0
    while (!closed) {
      try {
        if (lastId === undefined) {
          const tail = (await unlessClosed(conn.xrevrange(key, '+', '-', 'COUNT', 1))) as
            RawEntries | undefined
          if (tail === undefined) return
          lastId = tail[0]?.[0] ?? '0-0'
          markReady()
        }
        const res = (await unlessClosed(
          conn.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, lastId),
        )) as Array<[string, RawEntries]> | null | undefined
        if (res === undefined) return
        failures = 0
        const raw = res?.[0]?.[1] ?? []
        if (raw.length === 0 || closed) continue
        lastId = raw[raw.length - 1]![0]
        await options.onEntries(raw)
      } catch (err) {
        if (closed) return
        failures += 1
        log?.warn({ err, key }, `${name}: reading the stream failed; retrying`)
        await unlessClosed(new Promise((r) => setTimeout(r, Math.min(5_000, 200 * failures))))
      }
    }
  }
  const running = run()

  return {
    ready,
    get lastId() {
      return lastId ?? '0-0'
    },
    async close() {
      closed = true
      for (const onClose of waiting) onClose()
      waiting.clear()
      markReady()
      // A blocked XREAD only ends with its connection.
      conn.disconnect()
      await running.catch(() => undefined)
    },
  }
}
