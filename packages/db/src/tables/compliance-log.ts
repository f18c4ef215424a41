import type { Generated, Selectable } from 'kysely'
import type { Int8, Json, Timestamp, GeneratedTimestamp } from './columns.js'

/** One row per compliance event applied, each event once (docs/api.md §7). */
export interface ComplianceLogTable {
  seq: Generated<Int8>
  kind: 'tweet' | 'user'
  target_id: Int8
  /** Kind tweet: the Post's author, from the event or else from the stored Post. */
  author_id: Int8 | null
  action: string
  reason: string | null
  /** withheld_in_countries, up_to_tweet_id, initial_tweet_id, edit_tweet_ids, profile_field, … */
  detail: Json<Record<string, unknown>> | null
  event_at: Timestamp
  received_at: Timestamp
  applied_at: GeneratedTimestamp
  source: 'stream' | 'job' | 'import'
}
export type ComplianceLogEntry = Selectable<ComplianceLogTable>
