import { SEARCH_COUNT_FIELDS } from '@threadline/domain'
import type { EndpointParams } from '../../params.js'
import type { Endpoint } from '../../routes/route.js'

export const COUNTS_PARAMS = {
  query: { kind: 'string', required: true, description: 'A search query' },
  start_time: { kind: 'time' },
  end_time: { kind: 'time' },
  since_id: { kind: 'id' },
  until_id: { kind: 'id' },
  next_token: { kind: 'string' },
  pagination_token: { kind: 'string' },
  granularity: { kind: 'enum', values: ['minute', 'hour', 'day'] },
  'search_count.fields': { kind: 'list', values: SEARCH_COUNT_FIELDS },
} as const satisfies EndpointParams

export const COUNTS_RECENT = {
  method: 'GET',
  url: '/2/tweets/counts/recent',
  name: 'counts-recent',
  group: 'counts',
  params: COUNTS_PARAMS,
  summary: 'Counts, last 7 days',
} as const satisfies Endpoint<typeof COUNTS_PARAMS>

export const COUNTS_ALL = {
  method: 'GET',
  url: '/2/tweets/counts/all',
  name: 'counts-all',
  group: 'counts',
  params: COUNTS_PARAMS,
  summary: 'Counts, everything',
} as const satisfies Endpoint<typeof COUNTS_PARAMS>
