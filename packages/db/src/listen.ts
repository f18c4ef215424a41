import pg from 'pg'
import type { Logger } from '@threadline/logger'

export interface ListenOptions {
  url: string
  channel: string
  /** Called for each NOTIFY on the channel, with its payload. */
  onNotify: (payload: string) => void
  /**
   * Called after each (re)connection once LISTEN is in place, the first included: notifications
   * sent while disconnected are lost, so callers resynchronise here.
   */
  onListening?: () => void
  applicationName?: string
  logger?: Logger
  /** Delay before reconnecting, growing linearly per failure up to `maxRetryMs`. */
  retryMs?: number
  maxRetryMs?: number
}

export interface Listener {
  /** Resolves once the first LISTEN is in place (or the listener is closed). */
  ready: Promise<void>
  close(): Promise<void>
}

/**
 * LISTEN on a dedicated client (a pooled client would lose its LISTEN when returned), reconnecting
 * for as long as the listener is open.
 */
export function listen(options: ListenOptions): Listener {
  const log = options.logger?.child({ component: 'listen', channel: options.channel })
  const retryMs = options.retryMs ?? 250
  const maxRetryMs = options.maxRetryMs ?? 5_000
  let closed = false
  let client: pg.Client | undefined
  let failures = 0
  let retryTimer: NodeJS.Timeout | undefined
  let markReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (markReady = resolve))

  const scheduleReconnect = () => {
    if (closed || retryTimer) return
    failures += 1
    const delay = Math.min(maxRetryMs, retryMs * failures)
    retryTimer = setTimeout(() => {
      retryTimer = undefined
      void connect()
    }, delay)
  }

  const connect = async () => {
    if (closed) return
    const c = new pg.Client({
      connectionString: options.url,
      application_name: options.applicationName ?? 'threadline-listen',
      connectionTimeoutMillis: 10_000,
      keepAlive: true,
    })
    client = c
    let dropped = false
    const drop = (err?: unknown) => {
      if (dropped) return
      dropped = true
      if (!closed) log?.warn({ err }, 'listen connection lost; reconnecting')
      void c.end().catch(() => undefined)
      if (client === c) client = undefined
      scheduleReconnect()
    }
    c.on('error', drop)
    c.on('end', () => drop())
    c.on('notification', (msg) => {
      if (msg.channel === options.channel) options.onNotify(msg.payload ?? '')
    })
    try {
      await c.connect()
      await c.query(`LISTEN "${options.channel.replaceAll('"', '""')}"`)
    } catch (err) {
      drop(err)
      return
    }
    if (closed) {
      await c.end().catch(() => undefined)
      return
    }
    failures = 0
    log?.debug('listening')
    markReady()
    options.onListening?.()
  }

  void connect()
  return {
    ready,
    async close() {
      closed = true
      clearTimeout(retryTimer)
      markReady()
      const c = client
      client = undefined
      await c?.end().catch(() => undefined)
    },
  }
}
