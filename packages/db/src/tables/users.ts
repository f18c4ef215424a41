import type { Selectable } from 'kysely'
import type { WireUser } from '@threadline/domain'
import type { Int8, Json, Timestamp, GeneratedTimestamp } from './columns.js'

export interface UsersTable {
  id: Int8
  name: string
  username: string
  raw: Json<WireUser>
  observed_at: Timestamp
  updated_at: GeneratedTimestamp
}
export type User = Selectable<UsersTable>
