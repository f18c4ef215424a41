import { defineConfig } from 'vitest/config'

const nodeModules = '**/node_modules/**'
const exclude = [nodeModules, 'test/bench/**']

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // The benchmarks' own helpers too (their scripts are not tests).
          include: ['packages/*/src/**/*.test.ts', 'test/bench/lib/*.test.ts'],
          exclude: [nodeModules, '**/*.int.test.ts'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['**/*.int.test.ts', 'test/**/*.test.ts'],
          exclude,
          globalSetup: ['packages/testing/src/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          pool: 'forks',
        },
      },
    ],
  },
})
