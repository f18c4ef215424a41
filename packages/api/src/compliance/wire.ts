import { complianceJobStatus, type ComplianceJobRow } from '@threadline/db'
import { ApiError, PROBLEM_BASE } from '../errors.js'
import type { SignedUrls } from './signed-urls.js'

export const COMPLIANCE_JOB_FIELDS = [
  'created_at',
  'download_expires_at',
  'download_url',
  'id',
  'name',
  'resumable',
  'status',
  'type',
  'upload_expires_at',
  'upload_url',
] as const
export type ComplianceJobField = (typeof COMPLIANCE_JOB_FIELDS)[number]

/**
 * A job as X shows it (ComplianceJob). Without `compliance_job.fields` every field is there, as X
 * answers; with it, `id` and the fields named. A failed job carries X's `error` (its reason).
 */
export function complianceJobWire(
  job: ComplianceJobRow,
  ctx: { base: string; urls: SignedUrls; now: Date; fields?: readonly ComplianceJobField[] },
): Record<string, unknown> {
  const all: Record<ComplianceJobField, unknown> = {
    id: job.id,
    type: job.type,
    created_at: job.created_at.toISOString(),
    upload_url: ctx.urls.url(ctx.base, 'upload', job.id, job.upload_expires_at),
    upload_expires_at: job.upload_expires_at.toISOString(),
    download_url: ctx.urls.url(ctx.base, 'download', job.id, job.download_expires_at),
    download_expires_at: job.download_expires_at.toISOString(),
    status: complianceJobStatus(job, ctx.now),
    resumable: job.resumable,
    name: job.name ?? undefined,
  }
  const out: Record<string, unknown> = {}
  const wanted = ctx.fields ? new Set<string>(['id', ...ctx.fields]) : undefined
  for (const [k, v] of Object.entries(all)) {
    if (v !== undefined && (!wanted || wanted.has(k))) out[k] = v
  }
  if (job.status === 'failed' && job.error !== null) out.error = job.error
  return out
}

/** X's not-found for a job id (also another app's job: jobs belong to their app). */
export function jobNotFound(id: string): ApiError {
  return new ApiError(404, {
    title: 'Not Found Error',
    type: `${PROBLEM_BASE}resource-not-found`,
    status: 404,
    detail: `Could not find compliance job with id: [${id}].`,
    resource_type: 'compliance_job',
    resource_id: id,
    parameter: 'id',
    value: id,
  })
}

/**
 * The errors of X's signed URLs, which live on Google Cloud Storage: an XML body naming the code
 * (docs/api.md §8.1), so a client that handles X's keeps working.
 */
export function storageError(status: number, code: string, message: string, details?: string) {
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
  const body =
    "<?xml version='1.0' encoding='UTF-8'?>" +
    `<Error><Code>${code}</Code><Message>${esc(message)}</Message>` +
    (details === undefined ? '' : `<Details>${esc(details)}</Details>`) +
    '</Error>'
  return { status, body }
}

export const expiredToken = (at: Date) =>
  storageError(
    400,
    'ExpiredToken',
    'Invalid argument.',
    `The provided token has expired. Request signature expired at: ${at.toISOString()}`,
  )
export const signatureMismatch = () =>
  storageError(
    403,
    'SignatureDoesNotMatch',
    'The request signature we calculated does not match the signature you provided.',
  )
export const noSuchKey = () =>
  storageError(
    404,
    'NoSuchKey',
    'The specified key does not exist.',
    'No results yet: the job is not complete.',
  )
