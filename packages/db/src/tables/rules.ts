import type { Generated, Selectable } from 'kysely'
import type { Int8, GeneratedTimestamp } from './columns.js'

export interface StreamRulesTable {
  id: Int8
  app_id: Int8
  value: string
  tag: string | null
  created_at: GeneratedTimestamp
}
export type StreamRule = Selectable<StreamRulesTable>

export interface UpstreamRulesTable {
  value: string
  /** The upstream's id for the rule (a string: the upstream decides its form). */
  upstream_id: string | null
  status: Generated<'pending' | 'active' | 'rejected'>
  /** Why the upstream rejected the value; a rejected value is not retried until it changes. */
  reason: string | null
  updated_at: GeneratedTimestamp
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
  /** The search the backfill uses; null until known. */
  source: 'recent' | 'all' | null
  created_at: GeneratedTimestamp
  updated_at: GeneratedTimestamp
}
export type Backfill = Selectable<BackfillsTable>
