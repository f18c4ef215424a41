import type { Generated, Selectable } from 'kysely'
import type { WireUser } from '@threadline/domain'
import type { Int8, Json, Timestamp } from './columns.js'

export interface UsersTable {
  id: Int8
  name: string
  username: string
  raw: Json<WireUser>
  observed_at: Timestamp
  updated_at: Generated<Timestamp>
}
export type User = Selectable<UsersTable>
