import type { EndpointParams } from '../../params.js'
import type { Endpoint } from '../../routes/route.js'
import { FIELD_PARAMS } from '../../specs.js'

const searchParams = (maxResults: number) =>
  ({
    query: { kind: 'string', required: true, description: 'A search query' },
    start_time: { kind: 'time' },
    end_time: { kind: 'time' },
    since_id: { kind: 'id' },
    until_id: { kind: 'id' },
    max_results: { kind: 'int', min: 10, max: maxResults },
    next_token: { kind: 'string' },
    pagination_token: { kind: 'string' },
    sort_order: { kind: 'enum', values: ['recency', 'relevancy'] },
    ...FIELD_PARAMS,
  }) as const satisfies EndpointParams

export const SEARCH_RECENT_PARAMS = searchParams(100)
export const SEARCH_ALL_PARAMS = searchParams(500)

export const SEARCH_RECENT = {
  method: 'GET',
  url: '/2/tweets/search/recent',
  name: 'search-recent',
  group: 'search',
  params: SEARCH_RECENT_PARAMS,
  summary: 'Search the last 7 days',
} as const satisfies Endpoint<typeof SEARCH_RECENT_PARAMS>

export const SEARCH_ALL = {
  method: 'GET',
  url: '/2/tweets/search/all',
  name: 'search-all',
  group: 'search',
  params: SEARCH_ALL_PARAMS,
  summary: 'Search everything',
} as const satisfies Endpoint<typeof SEARCH_ALL_PARAMS>
