/** Test support for the API (`@threadline/testing/api`): X's response schemas, a server per test file. */
import { existsSync, readFileSync } from 'node:fs'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormatsModule from 'ajv-formats'
import { normalizeLines, type TweetComplianceAction } from '@threadline/domain'
import { buildServer, type ApiOptions, type ApiServer } from '@threadline/api'
import { applyComplianceEvents, createApp, createDb, storeBatch, type Db } from '@threadline/db'
import { createRedis } from '@threadline/redis'
import type { TestEnv } from './env.js'
import { findSharedFile } from './shared.js'

let ajv: Ajv | undefined
const compiled = new Map<string, ValidateFunction>()

function schemaValidator(name: string): ValidateFunction {
  let validate = compiled.get(name)
  if (validate) return validate
  if (!ajv) {
    const { path, tried } = findSharedFile('x-api-v2-openapi.json', 'X_OPENAPI_PATH')
    if (!existsSync(path)) {
      throw new Error(
        `X's OpenAPI document is not at ${tried.join(' nor ')}: the response-shape checks need ` +
          'the shared/ folder (with x-api-v2-openapi.json) beside the repository checkout, as CI ' +
          'lays it out, or X_OPENAPI_PATH.',
      )
    }
    const doc = JSON.parse(readFileSync(path, 'utf8')) as {
      components: { schemas: Record<string, { required?: string[] }> }
    }
    // docs/api.md §2.1: Threadline returns edit_history_tweet_ids only when asked.
    const tweet = doc.components.schemas.Tweet!
    tweet.required = (tweet.required ?? []).filter((f) => f !== 'edit_history_tweet_ids')
    ajv = new Ajv({ strict: false, allErrors: true, validateFormats: true })
    const addFormats = addFormatsModule as unknown as (a: Ajv) => Ajv
    addFormats(ajv)
    ajv.addSchema(doc, 'x')
  }
  validate = ajv.compile({ $ref: `x#/components/schemas/${name}` })
  compiled.set(name, validate)
  return validate
}

/** Asserts that `body` is valid against X's schema `name`; the error lists what is wrong. */
export function assertXSchema(name: string, body: unknown): void {
  const validate = schemaValidator(name)
  if (!validate(body)) {
    throw new Error(
      `response does not match X's ${name}: ${ajv!.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 2000)}`,
    )
  }
}

/** Stores stream lines as the writer would. */
export async function storeLines(db: Db, lines: string[], observedAt = new Date().toISOString()) {
  return storeBatch(db, normalizeLines(lines, observedAt), 'test')
}

/** X's stream events on stored Posts (a delete, a drop, …), each at `at`, applied as the writer does. */
export function withdrawPosts(
  db: Db,
  posts: Array<{ id: string; action: TweetComplianceAction }>,
  at: string,
) {
  return applyComplianceEvents(
    db,
    posts.map(({ id, action }) => ({
      kind: 'tweet',
      id,
      action,
      eventAt: at,
      receivedAt: at,
      source: 'stream',
    })),
  )
}

export const testOptions = (env: TestEnv, overrides: Partial<ApiOptions> = {}): ApiOptions => ({
  host: '127.0.0.1',
  port: 0,
  prefix: env.prefix,
  rateLimits: { lookup: 10_000, search: 10_000, counts: 10_000, rules: 10_000 },
  ruleCap: 1000,
  queryMaxLength: 1024,
  bodyLimit: 1_048_576,
  tokenCacheMs: 1_000,
  ...overrides,
})

/** A server over the test env's schema and Redis prefix, with its own clients, closed at teardown. */
export async function startTestServer(
  env: TestEnv,
  overrides: Partial<ApiOptions> & { tokenSecret?: string } = {},
  { listen = false }: { listen?: boolean } = {},
): Promise<{ server: ApiServer; token: string; appId: string; url: string }> {
  const { tokenSecret = 'test-secret', ...options } = overrides
  const server = buildServer(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 5 }),
      redis: createRedis(env.redisUrl, 'producer', 'api-test'),
      logger: env.logger,
      tokenSecrets: { current: tokenSecret },
    },
    testOptions(env, options),
  )
  env.defer(() => server.close())
  if (listen) await server.start()
  else await server.app.ready()
  const created = await createApp(env.db, 'test app')
  return { server, token: created.bearer_token, appId: created.app_id, url: server.url() }
}
