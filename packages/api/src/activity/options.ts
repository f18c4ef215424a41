import type { OutboundOptions } from '@threadline/activity'
import type { Config } from '@threadline/config'

export interface ActivityApiOptions {
  subscriptionCap: number
  webhookCap: number
  /** WEBHOOK_ALLOW_PRIVATE. */
  allowPrivate: boolean
  crcTimeoutMs: number
  maxResponseBytes: number
  streamMaxConnections: number
  keepAliveMs: number
  maxBufferedBytes: number
  /** Name resolution for webhook hosts (tests). */
  lookup?: OutboundOptions['lookup']
}

export const DEFAULT_ACTIVITY_OPTIONS: ActivityApiOptions = {
  subscriptionCap: 1_500,
  webhookCap: 10,
  allowPrivate: false,
  crcTimeoutMs: 10_000,
  maxResponseBytes: 65_536,
  streamMaxConnections: 1,
  keepAliveMs: 10_000,
  maxBufferedBytes: 1_048_576,
}

export function activityOptionsFromConfig(config: Config): ActivityApiOptions {
  return {
    ...DEFAULT_ACTIVITY_OPTIONS,
    subscriptionCap: config.ACTIVITY_SUBSCRIPTION_CAP,
    webhookCap: config.WEBHOOK_CAP,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
  }
}
