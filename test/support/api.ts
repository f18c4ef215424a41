import { fork, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import {
  apiDepsFromConfig,
  apiOptionsFromConfig,
  createApi,
  withApiOverrides,
  type ApiOverrides,
  type ApiServer,
} from '@threadline/api'
import type { TestEnv } from '@threadline/testing'

/**
 * The API as production builds it (createApi over the test file's configuration) with
 * `overrides`, listening on a free loopback port; started, and closed with the file's environment.
 */
export async function startApi(env: TestEnv, overrides: ApiOverrides = {}): Promise<ApiServer> {
  const api = createApi(
    await apiDepsFromConfig(env.config, env.logger),
    withApiOverrides(apiOptionsFromConfig(env.config), {
      ...overrides,
      server: { host: '127.0.0.1', port: 0, ...overrides.server },
    }),
  )
  env.defer(() => api.close())
  await api.start()
  return api
}

/** What the API in a process of its own (api-process.ts) is started with: JSON, in its argv. */
export interface ApiProcessOptions {
  /** Options over the configuration's (what JSON carries: no functions). */
  overrides?: ApiOverrides
  /**
   * Every webhook host name resolves to loopback, which the address policy refuses: no CRC check
   * leaves this machine.
   */
  webhooksResolveToLoopback?: boolean
}

const API_PROCESS = fileURLToPath(new URL('./api-process.ts', import.meta.url))

/**
 * The API in a process of its own, configured by the test file's environment plus `env` and
 * started with `options`, once it listens. `stop` is deferred to the file's teardown at once, so a
 * process that never listens is stopped too. Over IPC it answers `gc` (with `gc-done`, when node
 * runs with --expose-gc) and `close`.
 */
export async function forkApi(
  testEnv: TestEnv,
  stop: (child: ChildProcess) => unknown,
  {
    options = {},
    env = {},
    execArgv = [],
  }: { options?: ApiProcessOptions; env?: Record<string, string>; execArgv?: string[] } = {},
): Promise<{ child: ChildProcess; url: string }> {
  const child = fork(API_PROCESS, [JSON.stringify(options)], {
    execArgv: ['--import', 'tsx', ...execArgv],
    env: { ...process.env, ...testEnv.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  testEnv.defer(() => stop(child))
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (m) => resolve((m as { url: string }).url))
    child.once('exit', (code) =>
      reject(new Error(`the API process exited (${code}) before listening`)),
    )
  })
  return { child, url }
}
