import type { Generated, GeneratedAlways, Selectable } from 'kysely'
import type { Int8, Timestamp, GeneratedTimestamp } from './columns.js'

export interface WebhooksTable {
  id: Int8
  app_id: Int8
  url: string
  valid: Generated<boolean>
  /** Consecutive failed CRC checks; past a bound the webhook is marked invalid. */
  crc_failures: Generated<number>
  crc_checked_at: GeneratedTimestamp
  /** The sequence number the next queued event gets (per-webhook order). */
  next_seq: Generated<string>
  /** Consecutive failed deliveries of the event at the head of the webhook's queue. */
  failures: Generated<number>
  /** No delivery before this time (backoff after a failure). */
  retry_at: Timestamp | null
  /** A sender holds the webhook until this time: one delivery in flight per webhook. */
  lease_until: Timestamp | null
  last_error: string | null
  created_at: GeneratedTimestamp
  updated_at: GeneratedTimestamp
}
export type Webhook = Selectable<WebhooksTable>

export interface ActivitySubscriptionsTable {
  id: Int8
  app_id: Int8
  event_type: string
  filter_user_id: Int8 | null
  filter_keyword: string | null
  tag: string | null
  webhook_id: Int8 | null
  created_at: GeneratedTimestamp
  updated_at: GeneratedTimestamp
}
export type ActivitySubscription = Selectable<ActivitySubscriptionsTable>

export interface ActivitySourcesTable {
  key: string
  created_at: GeneratedTimestamp
}

export interface WebhookDeliveriesTable {
  webhook_id: Int8
  seq: Int8
  event_uuid: Int8
  app_id: Int8
  subscription_id: Int8
  event_type: string
  /** The exact bytes POSTed (and signed). */
  body: string
  attempts: Generated<number>
  created_at: GeneratedTimestamp
}
export type WebhookDelivery = Selectable<WebhookDeliveriesTable>

export interface WebhookFailuresTable {
  id: GeneratedAlways<string>
  webhook_id: Int8
  app_id: Int8
  subscription_id: Int8
  event_uuid: Int8
  event_type: string
  url: string
  body: string
  attempts: number
  reason: string
  created_at: GeneratedTimestamp
  replayed_at: Timestamp | null
}
export type WebhookFailure = Selectable<WebhookFailuresTable>
