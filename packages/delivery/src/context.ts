import type { OutboundOptions } from '@threadline/activity'
import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { DeliveryMetrics } from '@threadline/metrics'
import type { createQueue, WebhooksJob } from '@threadline/queue'
import type { Redis } from '@threadline/redis'
import type { DeliveryOptions } from './options.js'

/** What every job of the delivery service works with; built once by `createDelivery`. */
export interface DeliveryContext {
  db: Db
  redis: Redis
  prefix: string
  log: Logger
  metrics?: DeliveryMetrics
  options: DeliveryOptions
  /** Where a webhook with queued events gets its `webhooks` (drain) job. */
  webhooksQueue: ReturnType<typeof createQueue<WebhooksJob>>
  /** How webhook requests and CRC checks go out. */
  outbound: Omit<OutboundOptions, 'method'>
  /** A sender's hold on a webhook. */
  leaseMs: number
}
