/**
 * The API the fuzz suite attacks, in a process of its own so that the suite's memory check
 * measures the server alone, not the fuzzer beside it. Configured by the environment (the suite's
 * test schema and Redis prefix); started with --expose-gc. Over IPC it answers `{ url }` once
 * listening, collects garbage on `gc` (answering `gc-done`), and closes on `close`.
 */
import {
  apiDepsFromConfig,
  apiOptionsFromConfig,
  createApi,
  withApiOverrides,
} from '@threadline/api'
import { loadConfig } from '@threadline/config'
import { silentLogger } from '@threadline/logger'

const config = loadConfig()
const server = createApi(
  await apiDepsFromConfig(config, silentLogger()),
  withApiOverrides(apiOptionsFromConfig(config), {
    server: { host: '127.0.0.1', port: 0 },
    // Every webhook host name resolves to loopback, which the address policy refuses: no CRC
    // check leaves this machine.
    activity: {
      allowPrivate: false,
      lookup: ((_host: string, _opts: unknown, cb: (...a: unknown[]) => void) =>
        cb(null, [{ address: '127.0.0.1', family: 4 }])) as never,
    },
  }),
)
await server.start()
process.on('message', (message: unknown) => {
  if (message === 'gc') {
    global.gc?.()
    process.send?.('gc-done')
  } else if (message === 'close') {
    void server.close().finally(() => process.disconnect())
  }
})
process.send?.({ url: server.url() })
