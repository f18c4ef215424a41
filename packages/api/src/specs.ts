import {
  MEDIA_FIELDS,
  PLACE_FIELDS,
  POLL_FIELDS,
  TWEET_EXPANSIONS,
  TWEET_FIELDS,
  USER_FIELDS,
} from '@threadline/domain'
import type { EndpointParams } from './params.js'

/** The field and expansion parameters every Post-returning endpoint takes (docs/api.md §2.2). */
export const FIELD_PARAMS = {
  'tweet.fields': { kind: 'list', values: TWEET_FIELDS, description: 'Post fields to return' },
  expansions: { kind: 'list', values: TWEET_EXPANSIONS, description: 'Objects to include' },
  'media.fields': { kind: 'list', values: MEDIA_FIELDS },
  'poll.fields': { kind: 'list', values: POLL_FIELDS },
  'user.fields': { kind: 'list', values: USER_FIELDS, description: 'User fields to return' },
  'place.fields': { kind: 'list', values: PLACE_FIELDS },
  'post.fields': {
    kind: 'list',
    values: TWEET_FIELDS,
    aliasOf: 'tweet.fields',
    description: 'Alias of tweet.fields',
  },
} as const satisfies EndpointParams

export const RULES_GET_PARAMS = {
  ids: { kind: 'ids', min: 1, max: 1000 },
  max_results: { kind: 'int', min: 1, max: 1000 },
  pagination_token: { kind: 'string' },
} as const satisfies EndpointParams

/**
 * Rules one POST may add or delete (docs/api.md §3.2): the work of one request stays bounded
 * whatever the app's cap, and its ids stay far below Postgres's parameter limit.
 */
export const RULES_PER_REQUEST = 1_000

export const RULES_POST_PARAMS = {
  dry_run: { kind: 'bool' },
  delete_all: { kind: 'bool' },
} as const satisfies EndpointParams

/** `GET /2/tweets/search/stream` (docs/api.md §3.3). */
export const STREAM_PARAMS = {
  backfill_minutes: { kind: 'int', min: 0, max: 5, description: 'Replay the last N minutes first' },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

/** `GET /2/activity/subscriptions` (docs/api.md §4.2). */
export const SUBSCRIPTIONS_GET_PARAMS = {
  max_results: { kind: 'int', min: 1, max: 1000 },
  pagination_token: { kind: 'string' },
} as const satisfies EndpointParams

export const NO_PARAMS = {} as const satisfies EndpointParams

export const SUBSCRIPTION_ID_PARAMS = {
  subscription_id: { kind: 'id', required: true, description: 'A subscription id' },
} as const satisfies EndpointParams

export const WEBHOOK_ID_PARAMS = {
  webhook_id: { kind: 'id', required: true, description: 'A webhook id' },
} as const satisfies EndpointParams

export const WEBHOOKS_GET_PARAMS = {
  'webhook_config.fields': { kind: 'list', values: ['created_at', 'id', 'url', 'valid'] },
} as const satisfies EndpointParams

/** `GET /2/activity/stream` (docs/api.md §4.2). */
export const ACTIVITY_STREAM_PARAMS = {
  backfill_minutes: { kind: 'int', min: 0, max: 5 },
} as const satisfies EndpointParams

/** `GET /2/conversations/:conversation_id/stream` (docs/api.md §5.3). */
export const CONVERSATION_STREAM_PARAMS = {
  conversation_id: {
    kind: 'id',
    required: true,
    description: 'The id of the Post that started it',
  },
  ...STREAM_PARAMS,
} as const satisfies EndpointParams

/** `GET /2/conversations/:conversation_id/export` (docs/api.md §5.4). */
export const CONVERSATION_EXPORT_PARAMS = {
  conversation_id: {
    kind: 'id',
    required: true,
    description: 'The id of the Post that started it',
  },
  format: { kind: 'enum', values: ['jsonl', 'csv', 'graphml'], description: 'File format' },
} as const satisfies EndpointParams
