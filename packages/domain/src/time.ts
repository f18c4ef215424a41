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

/** The value of `count` ASCII digits of `s` from `at`, or -1 if one is not a digit. */
function digits(s: string, at: number, count: number): number {
  let n = 0
  for (let i = at; i < at + count; i++) {
    const d = s.charCodeAt(i) - 48
    if (d < 0 || d > 9) return -1
    n = n * 10 + d
  }
  return n
}

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
const isLeap = (y: number) => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0

/** Whether `s` is a valid time already in formatPostTime's form, checked without making a Date. */
function inPostTimeForm(s: string): boolean {
  if (s.length !== 24 || s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':')
    return false
  if (s[16] !== ':' || s[19] !== '.' || s[23] !== 'Z' || digits(s, 20, 3) < 0) return false
  const y = digits(s, 0, 4)
  const mo = digits(s, 5, 2)
  const d = digits(s, 8, 2)
  const h = digits(s, 11, 2)
  const mi = digits(s, 14, 2)
  const sec = digits(s, 17, 2)
  if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h < 0 || h > 23) return false
  if (mi < 0 || mi > 59 || sec < 0 || sec > 59) return false
  return d <= (mo === 2 && isLeap(y) ? 29 : DAYS_IN_MONTH[mo - 1]!)
}

/**
 * A Post's `created_at` as stored: formatPostTime(parseTime(value)), or undefined where parseTime
 * refuses it. X writes times in exactly that form (`2026-11-20T10:00:00.000Z`), and such a value is
 * its own result once its fields are checked: that path makes no Date (parsing and formatting took
 * a tenth of the writer's normalizing). Any other form goes the long way.
 */
export function postTime(value: unknown): string | undefined {
  if (typeof value === 'string' && inPostTimeForm(value)) return value
  const date = parseTime(value)
  return date && formatPostTime(date)
}
