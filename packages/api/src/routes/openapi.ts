import type { FastifyInstance } from 'fastify'
import type { createOpenApi } from '../openapi.js'

/**
 * `GET /2/openapi.json`: Threadline's own document, built from the endpoints' parameter specs as
 * the routes register (no token needed).
 */
export function registerOpenApiRoute(
  app: FastifyInstance,
  openApi: ReturnType<typeof createOpenApi>,
): void {
  app.get('/2/openapi.json', async () => openApi.document())
}
