import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/**
 * The fuzz suite's own configuration (`pnpm test:fuzz`): its files end in `.suite.ts`, so the root
 * configuration (`pnpm test`) never picks them up. Postgres and Redis as for the integration tests.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/fuzz/**/*.suite.ts'],
    globalSetup: ['packages/testing/src/global-setup.ts'],
    testTimeout: 300_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
