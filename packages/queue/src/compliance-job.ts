import { randomUUID } from 'node:crypto'
import type { Job, Queue } from 'bullmq'
import { COMPLIANCE_ACTIONS, type ComplianceEvent } from '@threadline/domain'
import { z } from 'zod'

/** The most events one `compliance` job carries: one transaction of the writer. */
export const COMPLIANCE_BATCH_MAX_EVENTS = 1_000

const id = z.string().regex(/^[0-9]{1,19}$/)
const time = z.iso.datetime({ offset: true })

/** One event as the ingest queues it (ComplianceEvent of @threadline/domain). */
const eventSchema = z.object({
  kind: z.enum(['tweet', 'user']),
  id,
  authorId: id.optional(),
  action: z.enum(COMPLIANCE_ACTIONS),
  reason: z.string().max(100).optional(),
  eventAt: time,
  withheldInCountries: z.array(z.string().max(8)).max(300).optional(),
  upToTweetId: id.optional(),
  initialTweetId: id.optional(),
  editTweetIds: z.array(id).max(100).optional(),
  profileField: z.string().max(100).optional(),
  newValue: z.string().max(10_000).optional(),
  receivedAt: time,
  source: z.enum(['stream', 'job', 'import']),
})

/** A `compliance` job: events for the writer's applyComplianceEvents. */
export const complianceJobSchema = z.object({
  events: z.array(eventSchema).min(1).max(COMPLIANCE_BATCH_MAX_EVENTS),
})
export interface ComplianceJob {
  events: ComplianceEvent[]
}

export interface ComplianceJobResult {
  applied: number
  repeated: number
}

/** The id of the `compliance` job of the `part`th slice of batch `batchId` (never all digits). */
export function complianceJobId(batchId: string, part = 0): string {
  return `compliance-${batchId}-${part}`
}

/**
 * Adds a `compliance` job for `events` under `jobId` (the same on every retry of the add, so a
 * retry after a lost reply queues nothing twice); job ids are never all digits (BullMQ's rule).
 */
export function addComplianceBatch(
  queue: Queue<ComplianceJob>,
  events: readonly ComplianceEvent[],
  jobId: string = complianceJobId(randomUUID()),
): Promise<Job<ComplianceJob>> {
  return queue.add('compliance', { events: [...events] }, { jobId })
}
