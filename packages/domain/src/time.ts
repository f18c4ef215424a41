const INPUT_TIME =
  /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/

/**
 * Parses an RFC 3339 time as X sends or accepts it: `Z` or an offset such as `+00:00`, with or
 * without fractional seconds. Anything else (including out-of-range fields) is undefined.
 */
export function parseTime(value: unknown): Date | undefined {
  if (typeof value !== 'string') return undefined
  const m = INPUT_TIME.exec(value)
  if (!m) return undefined
  const [, , mo, d, h, mi, s] = m
  if (Number(mo) < 1 || Number(mo) > 12 || Number(d) < 1 || Number(d) > 31) return undefined
  if (Number(h) > 23 || Number(mi) > 59 || Number(s) > 60) return undefined
  const ms = Date.parse(value)
  if (Number.isNaN(ms)) return undefined
  const date = new Date(ms)
  // Date.parse rolls 2026-02-31 over to March; refuse days a month does not have.
  if (m[8] === 'Z' && date.getUTCDate() !== Number(d)) return undefined
  if (date.getUTCFullYear() < 1970 || date.getUTCFullYear() > 9999) return undefined
  return date
}

/** Post times: `YYYY-MM-DDTHH:MM:SS.mmmZ`, always with milliseconds. */
export function formatPostTime(date: Date): string {
  return date.toISOString()
}

/** Subscription and webhook times: `YYYY-MM-DDTHH:MM:SSZ`, without milliseconds. */
export function formatSecondsTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z')
}
