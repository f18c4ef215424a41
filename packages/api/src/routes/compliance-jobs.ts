import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import {
  claimComplianceUpload,
  complianceJobStatus,
  complianceResultsPage,
  completeComplianceUpload,
  createComplianceJob,
  dropExpiredComplianceResults,
  failComplianceJob,
  findComplianceJob,
  findComplianceJobById,
  listComplianceJobs,
  stageComplianceIds,
  type ComplianceJobRow,
  type Db,
} from '@threadline/db'
import { isId } from '@threadline/domain'
import { InvalidRequestError, type InvalidParameter } from '../errors.js'
import { jsonObjectBody } from '../activity/body.js'
import {
  createComplianceChecker,
  leaseHeartbeat,
  UPLOAD_LOST,
  type ComplianceChecker,
  type ComplianceJobOptions,
} from '../compliance/checker.js'
import {
  createSignedUrls,
  DOWNLOAD_URL_MS,
  UPLOAD_URL_MS,
  type SignedPurpose,
  type SignedUrls,
} from '../compliance/signed-urls.js'
import { UploadRefusedError, uploadedIdChunks } from '../compliance/upload.js'
import {
  COMPLIANCE_JOB_FIELDS,
  complianceJobWire,
  expiredToken,
  jobNotFound,
  noSuchKey,
  signatureMismatch,
  storageError,
} from '../compliance/wire.js'
import type { EndpointParams } from '../params.js'
import type { ServerContext } from '../types.js'
import { addRoute, type Answer, type Endpoint, type RouteContext } from './route.js'

const JOB_FIELDS_PARAM = {
  'compliance_job.fields': {
    kind: 'list',
    values: COMPLIANCE_JOB_FIELDS,
    description: 'ComplianceJob fields to return (all when absent)',
  },
} as const satisfies EndpointParams

const JOBS_LIST_PARAMS = {
  type: { kind: 'enum', values: ['tweets', 'users'], required: true },
  status: { kind: 'enum', values: ['created', 'in_progress', 'failed', 'complete', 'expired'] },
  ...JOB_FIELDS_PARAM,
} as const satisfies EndpointParams

const JOB_ID_PARAMS = {
  id: { kind: 'id', required: true, description: 'A compliance job id' },
  ...JOB_FIELDS_PARAM,
} as const satisfies EndpointParams

const NO_PARAMS = {} as const satisfies EndpointParams

export const COMPLIANCE_JOBS_CREATE = {
  method: 'POST',
  url: '/2/compliance/jobs',
  name: 'compliance-jobs-create',
  group: 'rules',
  params: NO_PARAMS,
  summary: 'Create a batch compliance job (upload and download URLs on Threadline)',
} as const satisfies Endpoint<typeof NO_PARAMS>

export const COMPLIANCE_JOBS_LIST = {
  method: 'GET',
  url: '/2/compliance/jobs',
  name: 'compliance-jobs-list',
  group: 'lookup',
  params: JOBS_LIST_PARAMS,
  summary: "The app's recent compliance jobs of a type",
} as const satisfies Endpoint<typeof JOBS_LIST_PARAMS>

export const COMPLIANCE_JOB_GET = {
  method: 'GET',
  url: '/2/compliance/jobs/:id',
  name: 'compliance-job',
  group: 'lookup',
  params: JOB_ID_PARAMS,
  summary: 'One compliance job',
} as const satisfies Endpoint<typeof JOB_ID_PARAMS>

/** The signed URLs' own parameter: the token that authorizes them (no Authorization header). */
const SIGNED_PARAMS = {
  id: { kind: 'id', required: true, description: 'A compliance job id' },
  token: { kind: 'string', required: true, description: 'The signed token from the job' },
} as const satisfies EndpointParams

/** A job's signed URL (its upload_url or download_url), authorized by the token it carries. */
interface SignedRoute {
  method: 'GET' | 'PUT'
  url: string
  name: string
  summary: string
  purpose: SignedPurpose
}

const COMPLIANCE_JOB_UPLOAD = {
  method: 'PUT',
  url: '/2/compliance/jobs/:id/upload',
  name: 'compliance-job-upload',
  summary: "Upload a job's ids, one a line (the job's upload_url; no Authorization)",
  purpose: 'upload',
} as const satisfies SignedRoute

const COMPLIANCE_JOB_DOWNLOAD = {
  method: 'GET',
  url: '/2/compliance/jobs/:id/download',
  name: 'compliance-job-download',
  summary: "A complete job's result, JSON lines (the job's download_url; no Authorization)",
  purpose: 'download',
} as const satisfies SignedRoute

/** Result lines read per query while a download streams. */
const DOWNLOAD_PAGE = 10_000

const NAME_MAX = 64

async function* noBody(): AsyncGenerator<Buffer> {}

/** The body of `POST /2/compliance/jobs`, checked with X's messages. */
function parseCreateBody(body: Record<string, unknown>): {
  type: 'tweets' | 'users'
  name?: string
  resumable: boolean
} {
  const errors: InvalidParameter[] = []
  const add = (name: string, value: unknown, message: string) =>
    errors.push({
      parameters: { [name]: value === undefined ? [] : [JSON.stringify(value)] },
      message,
    })
  for (const key of Object.keys(body)) {
    if (!['type', 'name', 'resumable'].includes(key)) {
      add(key, body[key], `The body parameter [${key}] is not one of [type,name,resumable]`)
    }
  }
  const { type, name, resumable } = body
  if (type !== 'tweets' && type !== 'users') {
    add('type', type, 'The `type` body parameter must be one of [tweets,users]')
  }
  if (name !== undefined && (typeof name !== 'string' || [...name].length > NAME_MAX)) {
    add(
      'name',
      name,
      `The \`name\` body parameter must be a string of at most ${NAME_MAX} characters`,
    )
  } else if (typeof name === 'string' && name.includes('\u0000')) {
    add('name', name, 'The `name` body parameter holds a NUL character, which is not allowed')
  }
  if (resumable !== undefined && typeof resumable !== 'boolean') {
    add('resumable', resumable, 'The `resumable` body parameter must be a boolean')
  }
  if (errors.length > 0) throw new InvalidRequestError(errors)
  return {
    type: type as 'tweets' | 'users',
    ...(typeof name === 'string' ? { name } : {}),
    resumable: resumable === true,
  }
}

/** Where this API is reached, as the client reached it (behind trusted proxies, as they say). */
const baseUrl = (request: FastifyRequest) => `${request.protocol}://${request.host}`

const sendStorage = (reply: FastifyReply, e: { status: number; body: string }) =>
  reply.status(e.status).type('application/xml; charset=UTF-8').send(e.body)

/** What every job route works with: the server's context, the signed URLs and the checker. */
interface JobRoutes {
  ctx: ServerContext
  options: ComplianceJobOptions
  urls: SignedUrls
  checker: ComplianceChecker
}

const jobWire = (
  jobs: JobRoutes,
  request: FastifyRequest,
  job: ComplianceJobRow,
  fields?: readonly string[],
) =>
  complianceJobWire(job, {
    base: baseUrl(request),
    urls: jobs.urls,
    now: jobs.ctx.now(),
    fields: fields as typeof COMPLIANCE_JOB_FIELDS | undefined,
  })

/** `POST /2/compliance/jobs`: a new job, with its signed URLs. */
async function createJob(jobs: JobRoutes, c: RouteContext<typeof NO_PARAMS>): Promise<Answer> {
  const { db, log } = jobs.ctx
  const body = parseCreateBody(jsonObjectBody(c.request, true))
  const now = jobs.ctx.now()
  // Housekeeping, not the request's business: a failure is logged, the job still made.
  await dropExpiredComplianceResults(db, now).catch((err: unknown) =>
    log.warn({ err }, 'expired compliance results not dropped'),
  )
  const job = await createComplianceJob(db, {
    appId: c.client.app_id,
    ...body,
    uploadExpiresAt: new Date(now.getTime() + UPLOAD_URL_MS),
    downloadExpiresAt: new Date(now.getTime() + DOWNLOAD_URL_MS),
  })
  return { body: { data: jobWire(jobs, c.request, job) } }
}

/** `GET /2/compliance/jobs`: the app's recent jobs of a type. */
async function listJobs(
  jobs: JobRoutes,
  c: RouteContext<typeof JOBS_LIST_PARAMS>,
): Promise<Answer> {
  await jobs.checker.recover(c.client.app_id)
  const rows = await listComplianceJobs(jobs.ctx.db, {
    appId: c.client.app_id,
    type: c.params.type,
    status: c.params.status,
    now: jobs.ctx.now(),
  })
  const fields = c.params['compliance_job.fields']
  const body: Record<string, unknown> = {}
  if (rows.length > 0) body.data = rows.map((r) => jobWire(jobs, c.request, r, fields))
  body.meta = { result_count: rows.length }
  return { body }
}

/** `GET /2/compliance/jobs/:id`: one of the app's jobs. */
async function getJob(jobs: JobRoutes, c: RouteContext<typeof JOB_ID_PARAMS>): Promise<Answer> {
  await jobs.checker.recover(c.client.app_id)
  const job = await findComplianceJob(jobs.ctx.db, c.client.app_id, c.params.id)
  if (!job) throw jobNotFound(c.params.id)
  return { body: { data: jobWire(jobs, c.request, job, c.params['compliance_job.fields']) } }
}

type SignedRequest = FastifyRequest<{ Params: { id: string } }>

/** The job a signed URL names, or the storage error its client gets. */
async function signedJob(
  jobs: JobRoutes,
  request: SignedRequest,
  purpose: SignedPurpose,
): Promise<ComplianceJobRow | { status: number; body: string }> {
  const id = request.params.id
  const token = new URL(request.url, 'http://x').searchParams.get('token') ?? ''
  if (!isId(id)) return signatureMismatch()
  const checked = jobs.urls.check(purpose, id, token, jobs.ctx.now())
  if (!checked.ok) return checked.expired ? expiredToken(checked.expired) : signatureMismatch()
  return (await findComplianceJobById(jobs.ctx.db, id)) ?? noSuchKey()
}

/** Registers a signed URL: its handler runs with the job the token names, else the storage error. */
function addSignedRoute(
  app: FastifyInstance,
  jobs: JobRoutes,
  route: SignedRoute,
  handler: (
    jobs: JobRoutes,
    job: ComplianceJobRow,
    request: SignedRequest,
    reply: FastifyReply,
  ) => Promise<FastifyReply>,
): void {
  app.route<{ Params: { id: string } }>({
    method: route.method,
    url: route.url,
    config: { signedUrl: { name: route.name, summary: route.summary, params: SIGNED_PARAMS } },
    handler: async (request, reply) => {
      const found = await signedJob(jobs, request, route.purpose)
      if (!('id' in found)) return sendStorage(reply, found)
      return handler(jobs, found, request, reply)
    },
  })
}

/** The upload URL: the ids, staged a chunk at a time under the job's lease; then the check starts. */
async function uploadJobIds(
  jobs: JobRoutes,
  found: ComplianceJobRow,
  request: SignedRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const { db, log } = jobs.ctx
  const lease = { id: found.id, owner: jobs.checker.owner, leaseMs: jobs.options.leaseMs }
  const job = await claimComplianceUpload(db, lease)
  if (!job) {
    const status = complianceJobStatus(found, jobs.ctx.now())
    return sendStorage(
      reply,
      storageError(409, 'Conflict', `This job is ${status}: it takes one upload only.`),
    )
  }
  const heartbeat = leaseHeartbeat(db, lease, log)
  try {
    // The payload stream (the upload context's parser), or nothing when the PUT had no body.
    const body = (request.body as AsyncIterable<Buffer> | undefined) ?? noBody()
    const staged = await stageUploadedIds(jobs, job.id, body)
    await completeComplianceUpload(db, { ...lease, ...staged })
  } catch (err) {
    // Awaited: the heartbeat (finally) stops only once the job is marked failed.
    return await failUpload(jobs, job.id, err, reply)
  } finally {
    heartbeat.stop()
  }
  jobs.checker.start(job)
  return reply.status(200).send('')
}

/** Stages an upload's ids a chunk at a time; how many chunks and ids it held. */
async function stageUploadedIds(
  jobs: JobRoutes,
  jobId: string,
  body: AsyncIterable<Buffer>,
): Promise<{ chunks: number; ids: number }> {
  const { chunkIds, maxIds, maxBytes } = jobs.options
  let chunks = 0
  let ids = 0
  for await (const chunk of uploadedIdChunks(body, { chunkIds, maxIds, maxBytes })) {
    await stageComplianceIds(jobs.ctx.db, jobId, chunks, chunk)
    chunks += 1
    ids += chunk.length
  }
  return { chunks, ids }
}

/** An upload that failed fails its job; one refused (too large, a bad id) is told as storage. */
async function failUpload(
  jobs: JobRoutes,
  jobId: string,
  err: unknown,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const refused = err instanceof UploadRefusedError
  await failComplianceJob(jobs.ctx.db, {
    id: jobId,
    owner: jobs.checker.owner,
    error: refused ? err.message : UPLOAD_LOST,
  }).catch((e: unknown) => jobs.ctx.log.warn({ err: e, job: jobId }, 'job not marked failed'))
  if (!refused) throw err
  const code = err.status === 413 ? 'EntityTooLarge' : 'InvalidArgument'
  // The rest of the body is not read: the connection closes after the answer.
  reply.header('connection', 'close')
  return sendStorage(reply, storageError(err.status, code, err.message))
}

/** The download URL: a complete job's result lines, streamed a page at a time. */
async function downloadJobResults(
  jobs: JobRoutes,
  found: ComplianceJobRow,
  _request: SignedRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  if (found.status !== 'complete') return sendStorage(reply, noSuchKey())
  const lines = resultLines(jobs.ctx.db, found.id)
  return reply.type('text/plain; charset=utf-8').send(Readable.from(lines))
}

async function* resultLines(db: Db, jobId: string): AsyncGenerator<string> {
  let afterId: string | undefined
  for (;;) {
    const page = await complianceResultsPage(db, { jobId, afterId, limit: DOWNLOAD_PAGE })
    if (page.length === 0) return
    yield page.map((r) => r.line).join('\n') + '\n'
    if (page.length < DOWNLOAD_PAGE) return
    afterId = page[page.length - 1]!.id
  }
}

/**
 * Batch compliance jobs for Threadline's clients (docs/api.md §8.1): X's three endpoints, and the
 * job's signed upload and download URLs, which need no Authorization header.
 */
export function registerComplianceJobRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  options: ComplianceJobOptions,
): void {
  const jobs: JobRoutes = {
    ctx,
    options,
    urls: createSignedUrls(ctx.pageTokens),
    checker: createComplianceChecker({ db: ctx.db, log: ctx.log, options }),
  }
  app.addHook('onClose', async () => {
    await jobs.checker.close()
  })
  addRoute(app, ctx, COMPLIANCE_JOBS_CREATE, (c) => createJob(jobs, c))
  addRoute(app, ctx, COMPLIANCE_JOBS_LIST, (c) => listJobs(jobs, c))
  addRoute(app, ctx, COMPLIANCE_JOB_GET, (c) => getJob(jobs, c))
  // The upload reads its body as a stream (up to 100 MB, never held whole): its own content-type
  // parser, in a context of its own so that the other routes keep reading theirs as text.
  void app.register(async (uploads) => {
    uploads.removeAllContentTypeParsers()
    uploads.addContentTypeParser('*', (_request, payload, done) => done(null, payload))
    addSignedRoute(uploads, jobs, COMPLIANCE_JOB_UPLOAD, uploadJobIds)
  })
  addSignedRoute(app, jobs, COMPLIANCE_JOB_DOWNLOAD, downloadJobResults)
}
