/**
 * An API in a process of its own (forked by forkApi in api.ts): for a test that kills it, or
 * measures its memory apart from the test's. Configured by the environment (the test's schema,
 * Redis prefix and token secret); its ApiProcessOptions come as JSON in argv[2]. Over IPC it
 * answers `{ url }` once listening, collects garbage on `gc` (answering `gc-done`), and closes on
 * `close`.
 */
import {
  apiDepsFromConfig,
  apiOptionsFromConfig,
  createApi,
  withApiOverrides,
} from '@threadline/api'
import { loadConfig } from '@threadline/config'
import { silentLogger } from '@threadline/logger'
import type { ApiProcessOptions } from './api.js'

const { overrides = {}, webhooksResolveToLoopback = false } = JSON.parse(
  process.argv[2] ?? '{}',
) as ApiProcessOptions
const config = loadConfig()
const server = createApi(
  await apiDepsFromConfig(config, silentLogger()),
  withApiOverrides(apiOptionsFromConfig(config), {
    ...overrides,
    server: { ...overrides.server, host: '127.0.0.1', port: 0 },
    activity: webhooksResolveToLoopback
      ? {
          ...overrides.activity,
          allowPrivate: false,
          lookup: ((_host: string, _opts: unknown, cb: (...a: unknown[]) => void) =>
            cb(null, [{ address: '127.0.0.1', family: 4 }])) as never,
        }
      : overrides.activity,
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
