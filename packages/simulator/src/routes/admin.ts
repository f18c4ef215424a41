import type { IncomingMessage } from 'node:http'
import type { MalformedKind, Route } from '../stream.js'
import type { SimPost } from '../world.js'
import { HttpError, isObject, problem, readBody, type SimContext } from './route.js'

const ROUTES: readonly Route[] = [
  'stream',
  'rules',
  'search',
  'lookup',
  'users',
  'compliance',
  'compliance-jobs',
  'any',
]
const MALFORMED: readonly MalformedKind[] = ['truncated', 'not-json', 'no-id']
const oneOf = <T extends string>(list: readonly T[], v: unknown): T | undefined =>
  list.find((item) => item === v)

export interface AdminDeps extends SimContext {
  stats(): object
  emit(count: number): SimPost[]
  reply(conversationId: string, parentId?: string): SimPost
}

/**
 * `/_sim/*`: faults and records over HTTP, for tests that run the simulator as a process. Not an X
 * endpoint: its bodies are the simulator's own.
 */
export async function admin(
  deps: AdminDeps,
  req: IncomingMessage,
  path: string,
): Promise<{ status: number; body: unknown }> {
  const { hub, world } = deps
  const read = req.method === 'POST' ? await readBody(req) : undefined
  const body = isObject(read) ? read : {}
  const num = (name: string, fallback: number) => {
    const v = body[name]
    return typeof v === 'number' && Number.isFinite(v) ? v : fallback
  }
  switch (`${req.method} ${path}`) {
    case 'GET /_sim/stats': {
      // Counts only: the ids (and those no stream heard) are GET /_sim/sent's.
      const { ids: _ids, unheard: _unheard, byRule, ...sent } = hub.sent()
      const rules = Object.fromEntries(
        Object.entries(byRule).map(([id, { ids: _ruleIds, ...r }]) => [id, r]),
      )
      return { status: 200, body: { ...deps.stats(), sent: { ...sent, byRule: rules } } }
    }
    case 'GET /_sim/sent':
      return { status: 200, body: hub.sent() }
    case 'POST /_sim/sent/reset':
      hub.resetSent()
      return { status: 200, body: { ok: true } }
    case 'POST /_sim/withdraw': {
      // A Post deleted now, or one event of the world's mix.
      const id = body.post_id
      const event =
        typeof id === 'string' ? deps.withdrawals.deletePost(id) : deps.withdrawals.step()
      return { status: 200, body: { event: event ?? null } }
    }
    case 'GET /_sim/demo':
      return { status: 200, body: { conversation_ids: world.demoConversations() } }
    case 'POST /_sim/emit': {
      const conversationId = body.conversation_id
      if (typeof conversationId === 'string') {
        const parentId = typeof body.parent_id === 'string' ? body.parent_id : undefined
        return { status: 200, body: { ids: [deps.reply(conversationId, parentId).id] } }
      }
      return { status: 200, body: { ids: deps.emit(num('count', 1)).map((p) => p.id) } }
    }
    case 'POST /_sim/faults': {
      const f = hub.faults
      const count = num('count', 1)
      switch (body.fault) {
        case 'fail':
          f.failNext(count, {
            status: num('status', 429),
            route: oneOf(ROUTES, body.route) ?? 'stream',
            resetSeconds: num('reset_seconds', 1),
          })
          break
        case 'drop':
          return {
            status: 200,
            body: { dropped: f.dropStreams({ graceful: body.graceful === true }) },
          }
        case 'silence':
          f.silence(num('ms', 35_000))
          break
        case 'malformed':
          f.malformed(count, oneOf(MALFORMED, body.kind) ?? 'truncated')
          break
        case 'duplicate':
          f.duplicateNext(count)
          break
        case 'reorder':
          f.reorderNext(count)
          break
        case 'reset':
          f.reset()
          break
        default:
          throw new HttpError(
            400,
            problem(400, 'Invalid Request', `unknown fault ${String(body.fault)}`),
          )
      }
      return { status: 200, body: { ok: true } }
    }
    default:
      throw new HttpError(404, problem(404, 'Not Found Error', 'Not Found'))
  }
}
