import { readdirSync } from 'node:fs'
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/** Services are deployables: nothing imports them; logic and composition live in packages/. */
const noServices = {
  group: ['**/services/**', '@threadline/*-service'],
  message: 'services/* are deployables; import the package that holds the logic',
}

/** Import boundaries of docs/architecture.md §4: only these packages may import these libraries. */
const boundaries = [
  { libs: ['kysely', 'pg', 'pg-copy-streams'], allowed: ['packages/db/', 'packages/query/'] },
  { libs: ['bullmq'], allowed: ['packages/queue/'] },
  { libs: ['ioredis'], allowed: ['packages/redis/', 'packages/queue/'] },
  { libs: ['fastify', '@fastify/*'], allowed: ['packages/api/'] },
]

const workspaceDirs = ['packages', 'services'].flatMap((top) =>
  readdirSync(top).map((name) => `${top}/${name}/`),
)

export default tseslint.config(
  { ignores: ['**/node_modules/**', '**/dist/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_' },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
    },
  },
  // One block per directory: flat config keeps only the last block's options for a rule.
  ...workspaceDirs.map((dir) => ({
    files: [`${dir}**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            ...boundaries
              .filter(({ allowed }) => !allowed.includes(dir))
              .map(({ libs, allowed }) => ({
                group: libs,
                message: `only ${allowed.join(', ')} may import ${libs.join(', ')}`,
              })),
            noServices,
          ],
        },
      ],
    },
  })),
  {
    // Tests and benchmarks drive the libraries directly (baselines, fixtures).
    files: ['test/**/*.ts'],
    rules: { 'no-restricted-imports': ['error', { patterns: [noServices] }] },
  },
  {
    // Command-line output, tests and benchmarks may print.
    files: ['packages/cli/**/*.ts', 'test/**/*.ts', '**/*.test.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    files: ['*.js', '*.config.ts'],
    languageOptions: { parserOptions: { projectService: false, project: null } },
    ...tseslint.configs.disableTypeChecked,
  },
)
