import type {
  ActivitySourcesTable,
  ActivitySubscriptionsTable,
  WebhookDeliveriesTable,
  WebhookFailuresTable,
  WebhooksTable,
} from './activity.js'
import type { ApiTokensTable, AppsTable } from './apps.js'
import type { ComplianceLogTable } from './compliance-log.js'
import type { ConversationsTable } from './conversations.js'
import type { IngestRejectsTable, OutboxTable } from './ingest.js'
import type { PostMentionsTable } from './post-mentions.js'
import type { PostReferencesTable } from './post-references.js'
import type { PostsTable } from './posts.js'
import type { SecretsTable } from './secrets.js'
import type { UsersTable } from './users.js'
import type { BackfillsTable, StreamRulesTable, UpstreamRulesTable } from './rules.js'

export type * from './activity.js'
export type * from './apps.js'
export type * from './columns.js'
export type * from './compliance-log.js'
export type * from './conversations.js'
export type * from './ingest.js'
export type * from './post-mentions.js'
export type * from './post-references.js'
export type * from './posts.js'
export type * from './rules.js'
export type * from './secrets.js'
export type * from './users.js'

/** The whole schema, one table per file. Later issues add their tables here. */
export interface Database {
  posts: PostsTable
  post_references: PostReferencesTable
  post_mentions: PostMentionsTable
  users: UsersTable
  conversations: ConversationsTable
  apps: AppsTable
  api_tokens: ApiTokensTable
  ingest_rejects: IngestRejectsTable
  outbox: OutboxTable
  stream_rules: StreamRulesTable
  upstream_rules: UpstreamRulesTable
  backfills: BackfillsTable
  webhooks: WebhooksTable
  activity_subscriptions: ActivitySubscriptionsTable
  activity_sources: ActivitySourcesTable
  webhook_deliveries: WebhookDeliveriesTable
  webhook_failures: WebhookFailuresTable
  secrets: SecretsTable
  compliance_log: ComplianceLogTable
}
