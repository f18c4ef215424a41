import { bool, int, invalid, optionalIdList, text } from '../params.js'
import {
  badBody,
  defineRoute,
  isObject,
  readBody,
  type SimContext,
  type SimRoute,
} from './route.js'

const sentAt = () => new Date().toISOString()

const isStrings = (v: unknown): v is string[] =>
  Array.isArray(v) && v.every((k) => typeof k === 'string')

interface RuleInput {
  value: string
  tag?: string
}
const isRule = (r: unknown): r is RuleInput =>
  isObject(r) && typeof r.value === 'string' && (r.tag === undefined || typeof r.tag === 'string')

/** `GET` and `POST /2/tweets/search/stream/rules`. */
export function rulesRoutes({ rules }: SimContext): SimRoute[] {
  const list = defineRoute(
    {
      method: 'GET',
      path: '/2/tweets/search/stream/rules',
      fault: 'rules',
      window: 'rules:GET',
      params: {
        ids: optionalIdList(1000),
        max_results: int(1000, 1, 1000),
        pagination_token: text,
      },
    },
    ({ params }) => {
      const ids = params.ids && new Set(params.ids)
      const max = params.max_results
      const token = params.pagination_token
      const offset = token !== undefined ? Number(token) : 0
      if (!Number.isInteger(offset) || offset < 0) {
        throw invalid('pagination_token', token ?? '', 'Invalid pagination_token')
      }
      const all = rules.list().filter((r) => !ids || ids.has(r.id))
      const page = all.slice(offset, offset + max)
      const meta: Record<string, unknown> = { sent: sentAt(), result_count: page.length }
      if (offset + max < all.length) meta.next_token = String(offset + max)
      const data = page.map((r) => ({
        id: r.id,
        value: r.value,
        ...(r.tag !== undefined ? { tag: r.tag } : {}),
      }))
      return { status: 200, body: JSON.stringify(data.length > 0 ? { data, meta } : { meta }) }
    },
  )

  const change = defineRoute(
    {
      method: 'POST',
      path: '/2/tweets/search/stream/rules',
      fault: 'rules',
      window: 'rules:POST',
      params: { dry_run: bool, delete_all: bool },
    },
    async ({ params, req }) => {
      const dryRun = params.dry_run
      if (params.delete_all) {
        const { deleted } = rules.delete(
          rules.list().map((r) => r.id),
          'ids',
          dryRun,
        )
        req.resume()
        const meta = { sent: sentAt(), summary: { deleted: deleted.length, not_deleted: 0 } }
        return { status: 200, body: JSON.stringify({ meta }) }
      }
      const body = await readBody(req)
      if (!isObject(body) || 'add' in body === 'delete' in body) {
        throw badBody('The request body must hold exactly one of `add` or `delete`.')
      }
      if ('add' in body) {
        const add = body.add
        if (!Array.isArray(add) || add.length === 0 || !add.every(isRule)) {
          throw badBody('`add` must be a non-empty array of {value, tag?} objects.')
        }
        const result = rules.add(add, dryRun)
        const out: Record<string, unknown> = {}
        if (result.created.length > 0) {
          out.data = result.created.map((r) => ({
            value: r.value,
            ...(r.tag !== undefined ? { tag: r.tag } : {}),
            id: r.id,
          }))
        }
        out.meta = {
          sent: sentAt(),
          summary: {
            created: result.created.length,
            not_created: add.length - result.created.length,
            valid: add.length - result.invalid,
            invalid: result.invalid,
          },
        }
        if (result.errors.length > 0) out.errors = result.errors
        return { status: result.created.length > 0 ? 201 : 200, body: JSON.stringify(out) }
      }
      const del = body.delete
      const keys = isObject(del) ? (del.ids ?? del.values) : undefined
      if (!isObject(del) || !isStrings(keys)) {
        throw badBody('`delete` must be {ids: [...]} or {values: [...]}.')
      }
      const by = del.ids !== undefined ? 'ids' : 'values'
      const { deleted, missing } = rules.delete(keys, by, dryRun)
      const out: Record<string, unknown> = {
        meta: { sent: sentAt(), summary: { deleted: deleted.length, not_deleted: missing.length } },
      }
      if (missing.length > 0) {
        out.errors = missing.map((key) => ({
          errors: [
            {
              parameters: { [by]: [key] },
              message: `Rule ${by === 'ids' ? 'id' : 'value'} not found`,
            },
          ],
          title: 'Invalid Request',
          detail: 'One or more parameters to your request was invalid.',
          type: 'https://api.twitter.com/2/problems/invalid-request',
        }))
      }
      return { status: 200, body: JSON.stringify(out) }
    },
  )

  return [list, change]
}
