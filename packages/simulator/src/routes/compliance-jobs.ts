import type { IncomingMessage } from 'node:http'
import type { JobStatus } from '../compliance-jobs.js'
import { invalid, text, type Reader } from '../params.js'
import {
  badBody,
  defineRoute,
  isObject,
  readBody,
  type SimContext,
  type SimRoute,
} from './route.js'

const TYPES = ['tweets', 'users'] as const
const STATUSES: readonly JobStatus[] = ['created', 'in_progress', 'failed', 'complete', 'expired']

const jobType: Reader<'tweets' | 'users'> = (params, name) => {
  const raw = params.get(name)
  const type = TYPES.find((t) => t === raw)
  if (!type) {
    throw invalid(
      name,
      raw ?? '',
      `The \`${name}\` query parameter value [${raw ?? ''}] is not one of [tweets,users]`,
    )
  }
  return type
}

const jobStatus: Reader<JobStatus | undefined> = (params, name) => {
  const raw = params.get(name)
  if (raw === undefined) return undefined
  const status = STATUSES.find((s) => s === raw)
  if (!status) {
    throw invalid(
      name,
      raw,
      `The \`${name}\` query parameter value [${raw}] is not one of [${STATUSES.join(',')}]`,
    )
  }
  return status
}

/** The simulator's own address as the client reached it, for the transfer URLs. */
const baseOf = (req: IncomingMessage) => `http://${req.headers.host ?? '127.0.0.1'}`

/** `POST /2/compliance/jobs`, `GET /2/compliance/jobs?type=` and `GET /2/compliance/jobs/:id`. */
export function complianceJobRoutes({ jobs }: SimContext): SimRoute[] {
  const common = { fault: 'compliance-jobs', window: 'compliance-jobs' } as const
  return [
    defineRoute(
      { ...common, method: 'POST', path: '/2/compliance/jobs', params: {} },
      async ({ req }) => {
        const body = await readBody(req)
        if (!isObject(body)) throw badBody('The request body must be a JSON object.')
        const type = TYPES.find((t) => t === body.type)
        if (!type) {
          throw badBody('`type` must be one of [tweets,users].')
        }
        const name = body.name
        if (name !== undefined && (typeof name !== 'string' || name.length > 64)) {
          throw badBody('`name` must be a string of at most 64 characters.')
        }
        if (body.resumable !== undefined && typeof body.resumable !== 'boolean') {
          throw badBody('`resumable` must be true or false.')
        }
        const job = jobs.create(type, name, body.resumable === true)
        return { status: 200, body: JSON.stringify({ data: jobs.toWire(job, baseOf(req)) }) }
      },
    ),
    defineRoute(
      {
        ...common,
        method: 'GET',
        path: '/2/compliance/jobs',
        params: { 'compliance_job.fields': text, status: jobStatus, type: jobType },
      },
      ({ params, req }) => {
        const list = jobs.list(params.type, params.status).map((j) => jobs.toWire(j, baseOf(req)))
        const meta = { result_count: list.length }
        return {
          status: 200,
          body: JSON.stringify(list.length > 0 ? { data: list, meta } : { meta }),
        }
      },
    ),
    defineRoute(
      {
        ...common,
        method: 'GET',
        path: /^\/2\/compliance\/jobs\/\d{1,19}$/,
        params: { 'compliance_job.fields': text },
      },
      ({ path, req }) => {
        const id = path.slice('/2/compliance/jobs/'.length)
        const job = jobs.get(id)
        if (!job) {
          return {
            status: 200,
            body: JSON.stringify({
              errors: [
                {
                  value: id,
                  detail: `Could not find compliance job with id: [${id}].`,
                  title: 'Not Found Error',
                  resource_type: 'compliance_job',
                  parameter: 'id',
                  resource_id: id,
                  type: 'https://api.twitter.com/2/problems/resource-not-found',
                },
              ],
            }),
          }
        }
        return { status: 200, body: JSON.stringify({ data: jobs.toWire(job, baseOf(req)) }) }
      },
    ),
  ]
}
