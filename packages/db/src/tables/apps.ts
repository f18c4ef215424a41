import type { Selectable } from 'kysely'
import type { Int8, Timestamp, GeneratedTimestamp } from './columns.js'

export interface AppsTable {
  id: Int8
  name: string
  /** Signs webhook bodies and answers CRC checks, so it is kept usable, not hashed. */
  consumer_secret: string
  created_at: GeneratedTimestamp
}
export type App = Selectable<AppsTable>

export interface ApiTokensTable {
  id: Int8
  app_id: Int8
  /** SHA-256 of the bearer token; the token itself is never stored. */
  token_hash: Buffer
  created_at: GeneratedTimestamp
  revoked_at: Timestamp | null
}
export type ApiToken = Selectable<ApiTokensTable>
