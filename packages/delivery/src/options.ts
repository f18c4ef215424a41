import type { OutboundOptions } from '@threadline/activity'

export interface DeliveryOptions {
  /** `activity` jobs at once. */
  concurrency: number
  /** Webhooks sent to at once (each has at most one request in flight). */
  webhookConcurrency: number
  lockDuration: number
  stalledInterval: number
  maxStalledCount: number
  timeoutMs: number
  maxResponseBytes: number
  maxAttempts: number
  retryBaseMs: number
  crcIntervalMs: number
  crcMaxFailures: number
  sweepMs: number
  streamRetentionMs: number
  allowPrivate: boolean
  shutdownTimeoutMs: number
  /** A sender's hold on a webhook; renewed before each request. */
  leaseMs?: number
  /** Name resolution for webhook hosts (tests resolve a name to loopback). */
  lookup?: OutboundOptions['lookup']
}
