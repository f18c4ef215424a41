import { createHash, randomBytes } from 'node:crypto'
import { generateId } from '@threadline/domain'
import type { Db } from '../connect.js'

export interface CreatedApp {
  app_id: string
  bearer_token: string
  consumer_secret: string
}

export function hashToken(token: string): Buffer {
  return createHash('sha256').update(token, 'utf8').digest()
}

/** Creates an app and its first bearer token. The token is returned once; only its hash is kept. */
export async function createApp(db: Db, name: string): Promise<CreatedApp> {
  const appId = generateId()
  const bearerToken = randomBytes(32).toString('base64url')
  const consumerSecret = randomBytes(32).toString('base64url')
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('apps')
      .values({ id: appId, name, consumer_secret: consumerSecret })
      .execute()
    await trx
      .insertInto('api_tokens')
      .values({ id: generateId(), app_id: appId, token_hash: hashToken(bearerToken) })
      .execute()
  })
  return { app_id: appId, bearer_token: bearerToken, consumer_secret: consumerSecret }
}

/**
 * The app a bearer token belongs to, or undefined. The lookup is by hash (an index probe, so its
 * time does not depend on how much of the token matched), and tokens are 256-bit random values.
 */
export async function findAppByToken(
  db: Db,
  token: string,
): Promise<{ app_id: string; token_id: string } | undefined> {
  const row = await db
    .selectFrom('api_tokens')
    .select(['app_id', 'id as token_id'])
    .where('token_hash', '=', hashToken(token))
    .where('revoked_at', 'is', null)
    .executeTakeFirst()
  return row
}

/**
 * The apps of several bearer tokens in one query (by hash, as findAppByToken): a map from each token
 * found to its app; unknown and revoked tokens are absent.
 */
export async function findAppsByTokens(
  db: Db,
  tokens: readonly string[],
): Promise<Map<string, { app_id: string; token_id: string }>> {
  const found = new Map<string, { app_id: string; token_id: string }>()
  if (tokens.length === 0) return found
  const hashes = tokens.map((t) => hashToken(t))
  const byHash = new Map(hashes.map((h, i) => [h.toString('hex'), tokens[i]!]))
  const rows = await db
    .selectFrom('api_tokens')
    .select(['token_hash', 'app_id', 'id as token_id'])
    .where('token_hash', 'in', hashes)
    .where('revoked_at', 'is', null)
    .execute()
  for (const row of rows) {
    const token = byHash.get(row.token_hash.toString('hex'))
    if (token !== undefined) found.set(token, { app_id: row.app_id, token_id: row.token_id })
  }
  return found
}

/**
 * The app named `name` with a fresh bearer token, creating the app the first time. Earlier tokens of
 * the app are revoked: this is for the demo app of `pnpm start`, whose token is printed each run.
 */
export async function demoApp(db: Db, name: string): Promise<CreatedApp> {
  const app = await db
    .selectFrom('apps')
    .selectAll()
    .where('name', '=', name)
    .orderBy('id')
    .executeTakeFirst()
  if (!app) return createApp(db, name)
  const bearerToken = randomBytes(32).toString('base64url')
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('api_tokens')
      .set({ revoked_at: new Date() })
      .where('app_id', '=', app.id)
      .where('revoked_at', 'is', null)
      .execute()
    await trx
      .insertInto('api_tokens')
      .values({ id: generateId(), app_id: app.id, token_hash: hashToken(bearerToken) })
      .execute()
  })
  return { app_id: app.id, bearer_token: bearerToken, consumer_secret: app.consumer_secret }
}

export async function findApp(db: Db, appId: string) {
  return db.selectFrom('apps').selectAll().where('id', '=', appId).executeTakeFirst()
}
