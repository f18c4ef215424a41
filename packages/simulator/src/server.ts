import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** Listens on `port` and `host`; resolves to the base URL (`http://host:port`). */
export async function listen(server: Server, port: number, host: string): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address() as AddressInfo
  const shown = address.family === 'IPv6' ? `[${address.address}]` : address.address
  return `http://${shown}:${address.port}`
}

/** Stops listening and ends every connection (open streams should be ended before). */
export async function closeServer(server: Server): Promise<void> {
  if (!server.listening) return
  const closed = new Promise<void>((resolve) => server.close(() => resolve()))
  server.closeAllConnections()
  await closed
}
