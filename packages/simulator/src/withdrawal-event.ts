import type { TweetComplianceAction, UserComplianceAction } from '@threadline/domain'

/** A Post action of X's compliance stream. */
export type TweetWithdrawal = TweetComplianceAction
/** A user action of X's compliance stream the world makes (not profile modifications). */
export type UserWithdrawal = Exclude<UserComplianceAction, 'user_profile_modification'>

/** One event the world's compliance streams and batch jobs report (ComplianceEvent's fields). */
export interface WithdrawalEvent {
  kind: 'tweet' | 'user'
  id: string
  authorId?: string
  action: TweetWithdrawal | UserWithdrawal
  eventAt: string
  withheldInCountries?: string[]
  upToTweetId?: string
  /** tweet_edit: the world edits a Post in place, so both name the Post itself. */
  initialTweetId?: string
  editTweetIds?: string[]
}

/** A batch job's result line for one id (X: `id`, `action`, `created_at`, `redacted_at`, `reason`). */
export interface JobResult {
  id: string
  action: 'delete'
  createdAt: string
  redactedAt: string
  reason: 'deleted' | 'protected' | 'suspended' | 'deactivated' | 'dropped'
}
