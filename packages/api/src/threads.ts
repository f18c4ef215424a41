import type { FastifyInstance, FastifyReply } from 'fastify'
import { isId } from '@threadline/domain'
import {
  isViewerFile,
  readViewerFile,
  VIEWER_CSP,
  viewerPage,
  type ViewerAsset,
} from '@threadline/viewer'
import { invalidRequest, notFoundRoute, serviceUnavailable } from './errors.js'

/**
 * The conversation viewer's pages (docs/api.md §6): `GET /threads`, `GET /threads/:id` and the
 * bundle they load. The pages need no token: their script reads the data through the public API
 * with the token the reader gives it.
 */

const ASSET_BASE = '/threads/assets'

function secure(reply: FastifyReply): FastifyReply {
  return reply
    .header('content-security-policy', VIEWER_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
}

function page(reply: FastifyReply, title: string) {
  return secure(reply)
    .header('cache-control', 'no-cache')
    .type('text/html; charset=utf-8')
    .send(viewerPage(ASSET_BASE, title))
}

export function registerThreadRoutes(app: FastifyInstance): void {
  const assets = new Map<string, ViewerAsset>()
  app.get('/threads', async (_request, reply) => page(reply, 'Conversations · Threadline'))

  app.get<{ Params: { conversation_id: string } }>(
    '/threads/:conversation_id',
    async (request, reply) => {
      const id = request.params.conversation_id
      if (!isId(id)) {
        throw invalidRequest(
          'conversation_id',
          [id],
          `The \`conversation_id\` query parameter value [${id}] is not valid`,
        )
      }
      return page(reply, `Conversation ${id} · Threadline`)
    },
  )

  app.get<{ Params: { file: string } }>(`${ASSET_BASE}/:file`, async (request, reply) => {
    const name = request.params.file
    if (!isViewerFile(name)) throw notFoundRoute()
    const asset = assets.get(name) ?? readViewerFile(name)
    // Only when the sources run without `pnpm build` (the image always has the bundle).
    if (!asset) throw serviceUnavailable()
    assets.set(name, asset)
    return secure(reply)
      .header('cache-control', 'no-cache')
      .type(asset.contentType)
      .send(asset.body)
  })
}
