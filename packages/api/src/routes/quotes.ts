import type { FastifyInstance } from 'fastify'
import { quotesPage } from '@threadline/db'
import type { EndpointParams } from '../params.js'
import { FIELD_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { postListAnswer } from './post-page.js'
import { addRoute, type Endpoint } from './route.js'

const QUOTES_PARAMS = {
  id: { kind: 'id', required: true, description: 'A Post id' },
  max_results: { kind: 'int', min: 10, max: 100, description: 'Posts per page (default 10)' },
  pagination_token: { kind: 'string', description: 'meta.next_token of the previous page' },
  exclude: { kind: 'list', values: ['replies', 'retweets'], description: 'Posts to leave out' },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

export const QUOTE_TWEETS = {
  method: 'GET',
  url: '/2/tweets/:id/quote_tweets',
  name: 'tweets-quotes',
  group: 'search',
  params: QUOTES_PARAMS,
  summary: 'The stored Posts that quote a Post, newest first',
} as const satisfies Endpoint<typeof QUOTES_PARAMS>

/** The Posts that quote a Post (docs/api.md §2.9): those `quotes_of_tweet_id:` matches. */
export function registerQuoteRoutes(app: FastifyInstance, ctx: ServerContext): void {
  addRoute(app, ctx, QUOTE_TWEETS, async (c) => {
    const id = c.params.id
    // X's meta for quotes: result_count and next_token only.
    const list = { path: `tweets/${id}/quote_tweets`, defaultSize: 10, timeline: false }
    return postListAnswer(ctx, c, list, (db, window) => quotesPage(db, id, window))
  })
}
