import type { GeneratedAlways, Selectable } from 'kysely'
import type { Json, GeneratedTimestamp } from './columns.js'

export interface IngestRejectsTable {
  id: GeneratedAlways<string>
  source: string
  /** The `posts` job the reject came from; null for rejects stored outside a job. */
  batch_id: string | null
  reason: string
  raw: string
  created_at: GeneratedTimestamp
}
export type IngestReject = Selectable<IngestRejectsTable>

export interface OutboxPayload {
  post_ids: string[]
  user_changes: Array<{
    id: string
    before: { name: string; username: string }
    after: { name: string; username: string }
  }>
}

/** What a batch newly stored, written in its transaction and relayed after commit. */
export interface OutboxTable {
  id: GeneratedAlways<string>
  payload: Json<OutboxPayload>
  created_at: GeneratedTimestamp
}
