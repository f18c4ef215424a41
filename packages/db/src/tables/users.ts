import type { Selectable } from 'kysely'
import type { WireUser } from '@threadline/domain'
import type { Int8, Json, Timestamp, GeneratedTimestamp } from './columns.js'

export interface UsersTable {
  id: Int8
  name: string
  username: string
  raw: Json<WireUser>
  observed_at: Timestamp
  /** What X withdrew (docs/api.md §7): 'deleted' (erased) or 'hidden' (kept, not served). */
  withdrawn: 'deleted' | 'hidden' | null
  /** X's reason word: deleted, protected, suspended, deactivated, dropped, … */
  withdrawn_reason: string | null
  /** The event_at of the last compliance event that set (or cleared) the state. */
  withdrawn_at: Timestamp | null
  withheld_in_countries: string[] | null
  updated_at: GeneratedTimestamp
}
export type User = Selectable<UsersTable>
