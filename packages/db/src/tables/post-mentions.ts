import type { Selectable } from 'kysely'
import type { Int8 } from './columns.js'

/** Who each Post mentions (`entities.mentions[].id`), filled by a trigger on `posts`. */
export interface PostMentionsTable {
  user_id: Int8
  post_id: Int8
}
export type PostMention = Selectable<PostMentionsTable>
