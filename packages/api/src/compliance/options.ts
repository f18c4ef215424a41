import type { ComplianceApiOptions } from '../types.js'
import { DEFAULT_COMPLIANCE_JOB_OPTIONS } from './checker.js'

/** The compliance API's timings and bounds (docs/api.md §8); tests override them. */
export const DEFAULT_COMPLIANCE_OPTIONS: ComplianceApiOptions = {
  ...DEFAULT_COMPLIANCE_JOB_OPTIONS,
  // The streams' lag behind the log: half a second, at one small query per kind per poll.
  logPollMs: 500,
  // X: one connection per partition.
  streamMaxConnections: 1,
  keepAliveMs: 10_000,
  maxBufferedBytes: 4 * 1024 * 1024,
}
