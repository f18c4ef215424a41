import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

/**
 * `pnpm test:compose`: builds the image and runs the compose stack (test/compose/compose.suite.ts).
 * Its files end in `.suite.ts`, so the root configuration (`pnpm test`) never picks them up; it
 * needs Docker, and starts everything it uses itself, so there is no global setup.
 */
export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../..', import.meta.url)),
    include: ['test/compose/**/*.suite.ts'],
    testTimeout: 300_000,
    hookTimeout: 900_000,
    pool: 'forks',
    fileParallelism: false,
  },
})
