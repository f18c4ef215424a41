import js from '@eslint/js'
import tseslint from 'typescript-eslint'

/** Import boundaries of design.md §2: only these packages may import these libraries. */
const boundaries = [
  { libs: ['kysely', 'pg', 'pg-copy-streams'], allowed: ['packages/db/', 'packages/query/'] },
  { libs: ['bullmq', 'ioredis'], allowed: ['packages/queue/'] },
  { libs: ['fastify', '@fastify/*'], allowed: ['services/api/'] },
]

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
  ...boundaries.map(({ libs, allowed }) => ({
    files: ['packages/**/*.ts', 'services/**/*.ts'],
    ignores: allowed.map((dir) => `${dir}**`),
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: libs, message: `only ${allowed.join(', ')} may import ${libs.join(', ')}` },
          ],
        },
      ],
    },
  })),
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
