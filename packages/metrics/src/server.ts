import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Logger } from '@threadline/logger'
import type { Metrics } from './metrics.js'

export interface MetricsServer {
  /** `http://host:port`; the exposition is at `${url}/metrics`. */
  readonly url: string
  readonly port: number
  close(): Promise<void>
}

/**
 * A bare node:http server for `GET /metrics`, apart from the API's port: no auth, no rate limits,
 * and the same scrape target in every process whatever roles it runs. `port` 0 takes a free port.
 */
export async function startMetricsServer(
  metrics: Metrics,
  options: { host: string; port: number; logger: Logger },
): Promise<MetricsServer> {
  const log = options.logger.child({ component: 'metrics' })
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path !== '/metrics' || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
      return
    }
    metrics.text().then(
      (body) => {
        res.writeHead(200, { 'content-type': metrics.contentType })
        res.end(req.method === 'HEAD' ? undefined : body)
      },
      (err: unknown) => {
        log.warn({ err }, 'collecting metrics failed')
        res.writeHead(500, { 'content-type': 'text/plain' }).end('collecting metrics failed\n')
      },
    )
  })
  // A scrape is one short request; idle keep-alive sockets must not hold close() up.
  server.keepAliveTimeout = 5_000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(options.port, options.host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  server.on('error', (err) => log.warn({ err }, 'metrics server error'))
  const { port } = server.address() as AddressInfo
  const host = options.host.includes(':') ? `[${options.host}]` : options.host
  return {
    url: `http://${host}:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
