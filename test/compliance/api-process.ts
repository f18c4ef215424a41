/**
 * An API in a process of its own, for the test that kills it mid-job (job-recovery.test.ts).
 * Configured by the environment (the test's schema, Redis prefix and token secret); its
 * compliance options come as JSON in argv[2]. Over IPC it answers `{ url }` once listening.
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
    compliance: JSON.parse(process.argv[2] ?? '{}') as object,
  }),
)
await server.start()
process.send?.({ url: server.url() })
