import type { Generated, Selectable } from 'kysely'
import type { Int8, Timestamp, GeneratedTimestamp } from './columns.js'

/** The thread table: one row per conversation, counters kept by the writer. */
export interface ConversationsTable {
  id: Int8
  /** Set once the Post whose id equals the conversation id is stored. */
  root_post_id: Int8 | null
  post_count: Generated<number>
  reply_count: Generated<number>
  /** Grows in the writer's transaction whenever a Post of it is stored or replaced. */
  version: Generated<Int8>
  first_created_at: Timestamp
  last_created_at: Timestamp
  updated_at: GeneratedTimestamp
}
export type Conversation = Selectable<ConversationsTable>
