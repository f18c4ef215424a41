import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/**
 * The chaos suite's own configuration (`pnpm test:chaos`): its files end in `.suite.ts`, so the
 * root configuration (`pnpm test`) never picks them up. It starts its own Postgres and Redis, so
 * there is no global setup.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/chaos/**/*.suite.ts'],
    testTimeout: 600_000,
    hookTimeout: 300_000,
    pool: 'forks',
    // One suite at a time: each runs a whole stack on this machine.
    fileParallelism: false,
  },
})
