import type { EndpointParams } from '../../params.js'
import type { Endpoint } from '../../routes/route.js'
import { FIELD_PARAMS } from '../../specs.js'

export const LOOKUP_PARAMS = {
  ids: { kind: 'ids', min: 1, max: 100, required: true, description: 'Post ids' },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

export const LOOKUP_ONE_PARAMS = {
  id: { kind: 'id', required: true, description: 'A Post id' },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

export const LOOKUP = {
  method: 'GET',
  url: '/2/tweets',
  name: 'tweets-lookup',
  group: 'lookup',
  params: LOOKUP_PARAMS,
  summary: 'Posts by ids',
} as const satisfies Endpoint<typeof LOOKUP_PARAMS>

export const LOOKUP_ONE = {
  method: 'GET',
  url: '/2/tweets/:id',
  name: 'tweets-lookup-one',
  group: 'lookup',
  params: LOOKUP_ONE_PARAMS,
  summary: 'A Post by id',
} as const satisfies Endpoint<typeof LOOKUP_ONE_PARAMS>
