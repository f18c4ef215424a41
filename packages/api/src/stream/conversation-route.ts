import type { FastifyInstance } from 'fastify'
import { selection } from '@threadline/domain'
import { parseParams, queryEntries } from '../params.js'
import { CONVERSATION_STREAM_PARAMS } from '../specs.js'
import { StreamRegistry } from './connection.js'
import type { FilteredStream } from './route.js'

export interface ConversationStreamOptions {
  /** Open conversation feeds per app, counted apart from the filtered stream's. */
  maxConnectionsPerApp: number
}

export interface ConversationStream {
  registry: StreamRegistry
}

/**
 * `GET /2/conversations/:conversation_id/stream` (docs/api.md §5.3): one conversation's newly stored Posts
 * as the filtered stream sends them, without rules. It rides the filtered stream's hub (one reader
 * of the `stored` stream per process) and framing; its connections are counted in a registry of
 * their own, so an app's feeds never take the filtered stream's slot.
 */
export function registerConversationStream(
  app: FastifyInstance,
  stream: FilteredStream,
  options: ConversationStreamOptions,
): ConversationStream {
  const registry = new StreamRegistry({
    ...stream.registry.options,
    kind: 'conversation-stream',
    maxPerApp: options.maxConnectionsPerApp,
  })
  app.addHook('preClose', async () => {
    await registry.closeAll()
  })

  app.route<{ Params: { conversation_id: string } }>({
    method: 'GET',
    url: '/2/conversations/:conversation_id/stream',
    config: {
      endpoint: {
        name: 'conversation-stream',
        group: 'rules',
        params: CONVERSATION_STREAM_PARAMS,
        summary: 'One conversation’s new Posts, live',
      },
    },
    handler: async (request, reply) => {
      const p = parseParams(CONVERSATION_STREAM_PARAMS, queryEntries(request.url), request.params)
      const sel = selection(
        (p['tweet.fields'] as string[] | undefined) ?? [],
        (p.expansions as string[] | undefined) ?? [],
        (p['user.fields'] as string[] | undefined) ?? [],
      )
      await stream.whenHubReady()
      const conn = await registry.open(reply, request.client!.app_id)
      stream.hub.attachConversation(
        conn,
        p.conversation_id as string,
        sel,
        (p.backfill_minutes as number | undefined) ?? 0,
      )
      return reply
    },
  })

  return { registry }
}
