import type { Generated, Selectable } from 'kysely'
import type { Int8, Timestamp } from './columns.js'

export interface StreamRulesTable {
  id: Int8
  app_id: Int8
  value: string
  tag: string | null
  created_at: Generated<Timestamp>
}
export type StreamRule = Selectable<StreamRulesTable>

export interface UpstreamRulesTable {
  value: string
  /** The upstream's id for the rule (a string: the upstream decides its form). */
  upstream_id: string | null
  status: Generated<'pending' | 'active' | 'rejected'>
  /** Why the upstream rejected the value; a rejected value is not retried until it changes. */
  reason: string | null
  updated_at: Generated<Timestamp>
}
export type UpstreamRule = Selectable<UpstreamRulesTable>

export interface BackfillsTable {
  conversation_id: Int8
  status: Generated<'pending' | 'running' | 'done' | 'failed'>
  next_token: string | null
  pages: Generated<number>
  posts: Generated<number>
  root_fetched: Generated<boolean>
  error: string | null
  created_at: Generated<Timestamp>
  updated_at: Generated<Timestamp>
}
export type Backfill = Selectable<BackfillsTable>
