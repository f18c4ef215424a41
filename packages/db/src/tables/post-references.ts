import type { Selectable } from 'kysely'
import type { ReferenceType } from '@threadline/domain'
import type { Int8 } from './columns.js'

export interface PostReferencesTable {
  post_id: Int8
  type: ReferenceType
  referenced_id: Int8
}
export type PostReference = Selectable<PostReferencesTable>
