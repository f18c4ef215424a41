import type { FastifyInstance } from 'fastify'
import { CONVERSATION_STREAM_PARAMS } from '../specs.js'
import { StreamRegistry } from '../stream/connection.js'
import { fieldSelection } from './fields.js'
import { addRoute, systemClock, type Endpoint } from './route.js'
import type { FilteredStream } from './stream.js'

export const CONVERSATION_STREAM = {
  method: 'GET',
  url: '/2/conversations/:conversation_id/stream',
  name: 'conversation-stream',
  group: 'rules',
  params: CONVERSATION_STREAM_PARAMS,
  summary: 'One conversation’s new Posts, live',
} as const satisfies Endpoint<typeof CONVERSATION_STREAM_PARAMS>

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

  addRoute(app, systemClock, CONVERSATION_STREAM, async (c) => {
    const sel = fieldSelection(c.params)
    await stream.whenHubReady()
    const conn = await registry.open(c.reply, c.client.app_id)
    stream.hub.attachConversation(
      conn,
      c.params.conversation_id,
      sel,
      c.params.backfill_minutes ?? 0,
    )
    return undefined
  })

  return { registry }
}
