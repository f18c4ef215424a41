import type { RouteOptions } from 'fastify'
import type { EndpointParams, ParamSpec } from './params.js'

function paramSchema(spec: ParamSpec): Record<string, unknown> {
  switch (spec.kind) {
    case 'id':
      return { type: 'string', pattern: '^[0-9]{1,19}$' }
    case 'ids':
      return {
        type: 'array',
        minItems: spec.min,
        maxItems: spec.max,
        items: { type: 'string', pattern: '^[0-9]{1,19}$' },
      }
    case 'int':
      return { type: 'integer', minimum: spec.min, maximum: spec.max }
    case 'enum':
      return { type: 'string', enum: [...spec.values] }
    case 'list':
      return { type: 'array', minItems: 1, items: { type: 'string', enum: [...spec.values] } }
    case 'time':
      return { type: 'string', format: 'date-time' }
    case 'bool':
      return { type: 'boolean' }
    case 'string':
      return { type: 'string' }
  }
}

const problem = {
  type: 'object',
  required: ['title', 'type'],
  properties: {
    title: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string' },
    errors: { type: 'array', items: { type: 'object' } },
  },
}

const page = {
  type: 'object',
  properties: {
    data: {},
    includes: { type: 'object' },
    errors: { type: 'array', items: { type: 'object' } },
    meta: { type: 'object' },
  },
}

interface Operation {
  method: string
  path: string
  name: string
  summary: string
  params: EndpointParams
  /** Authorized by the signed token in its URL (no bearer token). */
  signed: boolean
}

/**
 * Threadline's own OpenAPI document, generated from the parameter specs the routes validate with,
 * so the document cannot drift from what the server accepts.
 */
export function createOpenApi() {
  const operations: Operation[] = []
  return {
    onRoute(route: RouteOptions) {
      const endpoint = route.config?.endpoint ?? route.config?.signedUrl
      if (!endpoint || route.method === 'HEAD') return
      operations.push({
        method: String(route.method).toLowerCase(),
        path: route.url!.replace(/:(\w+)/g, '{$1}'),
        name: endpoint.name,
        summary: endpoint.summary,
        params: endpoint.params,
        signed: route.config?.endpoint === undefined,
      })
    },
    document(): Record<string, unknown> {
      const paths: Record<string, Record<string, unknown>> = {}
      for (const op of operations) {
        const pathParams = new Set([...op.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))
        paths[op.path] ??= {}
        paths[op.path]![op.method] = {
          operationId: op.name,
          summary: op.summary,
          security: op.signed ? [] : [{ BearerToken: [] }],
          parameters: Object.entries(op.params).map(([name, spec]) => ({
            name,
            in: pathParams.has(name) ? 'path' : 'query',
            required: pathParams.has(name) || spec.required === true,
            ...(spec.description ? { description: spec.description } : {}),
            schema: paramSchema(spec),
            ...(spec.kind === 'ids' || spec.kind === 'list'
              ? { style: 'form', explode: false }
              : {}),
          })),
          ...(op.method === 'post'
            ? {
                requestBody: {
                  required: false,
                  content: { 'application/json': { schema: { type: 'object' } } },
                },
              }
            : {}),
          ...(op.signed && op.method === 'put'
            ? {
                requestBody: {
                  required: true,
                  content: { 'text/plain': { schema: { type: 'string' } } },
                },
              }
            : {}),
          responses: {
            '200': {
              description: 'The request was successful.',
              content: op.signed
                ? { 'text/plain': { schema: { type: 'string' } } }
                : { 'application/json': { schema: { $ref: '#/components/schemas/Page' } } },
            },
            ...(op.method === 'post'
              ? {
                  '201': {
                    description: 'Rules were created.',
                    content: {
                      'application/json': { schema: { $ref: '#/components/schemas/Page' } },
                    },
                  },
                }
              : {}),
            default: {
              description: 'The request has failed.',
              content: {
                'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } },
              },
            },
          },
        }
      }
      return {
        openapi: '3.0.0',
        info: {
          title: 'Threadline read API',
          version: '2.0.0',
          description: 'A subset of the X API v2: Post lookup, search, counts and stream rules.',
        },
        servers: [{ url: '/' }],
        paths,
        components: {
          securitySchemes: { BearerToken: { type: 'http', scheme: 'bearer' } },
          schemas: { Problem: problem, Page: page },
        },
      }
    },
  }
}
