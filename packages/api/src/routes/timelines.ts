import type { FastifyInstance } from 'fastify'
import { userMentionsPage, userTimelinePage } from '@threadline/db'
import type { EndpointParams } from '../params.js'
import { FIELD_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { postListAnswer } from './post-page.js'
import { addRoute, type Endpoint } from './route.js'

const MENTIONS_PARAMS = {
  id: { kind: 'id', required: true, description: 'A user id' },
  since_id: { kind: 'id' },
  until_id: { kind: 'id' },
  start_time: { kind: 'time' },
  end_time: { kind: 'time' },
  max_results: { kind: 'int', min: 5, max: 100, description: 'Posts per page (default 10)' },
  pagination_token: {
    kind: 'string',
    description: 'meta.next_token or meta.previous_token of a page',
  },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

const TIMELINE_PARAMS = {
  ...MENTIONS_PARAMS,
  exclude: { kind: 'list', values: ['replies', 'retweets'], description: 'Posts to leave out' },
} as const satisfies EndpointParams

export const USER_TIMELINE = {
  method: 'GET',
  url: '/2/users/:id/tweets',
  name: 'users-timeline',
  group: 'search',
  params: TIMELINE_PARAMS,
  summary: "A user's stored Posts, newest first, to the end (no cap)",
} as const satisfies Endpoint<typeof TIMELINE_PARAMS>

export const USER_MENTIONS = {
  method: 'GET',
  url: '/2/users/:id/mentions',
  name: 'users-mentions',
  group: 'search',
  params: MENTIONS_PARAMS,
  summary: 'The stored Posts that mention a user, newest first, to the end (no cap)',
} as const satisfies Endpoint<typeof MENTIONS_PARAMS>

const DEFAULT_PAGE = 10

/** A user's timeline and mentions, in keyset pages (docs/api.md §2.8). */
export function registerTimelineRoutes(app: FastifyInstance, ctx: ServerContext): void {
  addRoute(app, ctx, USER_TIMELINE, async (c) => {
    const id = c.params.id
    const list = { path: `users/${id}/tweets`, defaultSize: DEFAULT_PAGE }
    return postListAnswer(ctx, c, list, (db, window) => userTimelinePage(db, id, window))
  })

  addRoute(app, ctx, USER_MENTIONS, async (c) => {
    const id = c.params.id
    const list = { path: `users/${id}/mentions`, defaultSize: DEFAULT_PAGE }
    return postListAnswer(ctx, c, list, (db, window) => userMentionsPage(db, id, window))
  })
}
