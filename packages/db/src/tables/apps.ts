import type { Generated, Selectable } from 'kysely'
import type { Int8, Timestamp } from './columns.js'

export interface AppsTable {
  id: Int8
  name: string
  /** Signs webhook bodies and answers CRC checks, so it is kept usable, not hashed. */
  consumer_secret: string
  created_at: Generated<Timestamp>
}
export type App = Selectable<AppsTable>

export interface ApiTokensTable {
  id: Int8
  app_id: Int8
  /** SHA-256 of the bearer token; the token itself is never stored. */
  token_hash: Buffer
  created_at: Generated<Timestamp>
  revoked_at: Timestamp | null
}
export type ApiToken = Selectable<ApiTokensTable>
