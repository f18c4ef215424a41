import type { Migration } from 'kysely'
import * as spine from './20261121T000100-spine.js'
import * as rules from './20261121T000150-rules.js'
import * as searchTerms from './20261121T000200-search-terms.js'
import * as activity from './20261121T000400-activity.js'
import * as conversationCounters from './20261121T000500-conversation-counters.js'
import * as conversationTree from './20261126T220000-conversation-tree.js'
import * as secrets from './20261126T230000-secrets.js'
import * as conversationChanges from './20261127T000000-conversation-changes.js'
import * as rejectBatch from './20261128T120000-reject-batch.js'
import * as dropConversationChanges from './20261128T120100-drop-conversation-changes.js'
import * as partitions from './20261128T120200-partitions.js'
import * as archiveReads from './20261128T120300-archive-reads.js'
import * as compliance from './20261128T130000-compliance.js'

/**
 * Every migration, in order. Names are timestamps so that they sort; add new files at the end
 * (`<UTC yyyymmddThhmmss>-<what>.ts`) and list them here.
 */
export const migrations: Record<string, Migration> = {
  '20261121T000100-spine': spine,
  '20261121T000150-rules': rules,
  '20261121T000200-search-terms': searchTerms,
  '20261121T000400-activity': activity,
  '20261121T000500-conversation-counters': conversationCounters,
  '20261126T220000-conversation-tree': conversationTree,
  '20261126T230000-secrets': secrets,
  '20261127T000000-conversation-changes': conversationChanges,
  '20261128T120000-reject-batch': rejectBatch,
  '20261128T120100-drop-conversation-changes': dropConversationChanges,
  '20261128T120200-partitions': partitions,
  '20261128T120300-archive-reads': archiveReads,
  '20261128T130000-compliance': compliance,
}
