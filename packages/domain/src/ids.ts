export const ID_PATTERN = /^[0-9]{1,19}$/
/** The largest signed 64-bit integer: among 19-digit strings, text order is numeric order. */
const MAX_ID = '9223372036854775807'

/** A Post, user or rule id: 1–19 decimal digits that fit a signed 64-bit integer. */
export function isId(value: unknown): value is string {
  return (
    typeof value === 'string' &&
    ID_PATTERN.test(value) &&
    (value.length < MAX_ID.length || value <= MAX_ID)
  )
}

/** X snowflake epoch (2010-11-04T01:42:54.657Z), in milliseconds. */
const TWEPOCH = 1288834974657n
/** Ids below this predate snowflakes (sequential ids from before late 2010). */
const FIRST_SNOWFLAKE = 29700859247n

/** The creation time encoded in a snowflake id, or undefined for pre-snowflake ids. */
export function snowflakeTime(id: string): Date | undefined {
  const n = BigInt(id)
  if (n < FIRST_SNOWFLAKE) return undefined
  return new Date(Number((n >> 22n) + TWEPOCH))
}

/** The smallest snowflake id that could have been made at `date` (for time-bounded id ranges). */
export function snowflakeAt(date: Date): string {
  const ms = BigInt(date.getTime()) - TWEPOCH
  return (ms < 0n ? 0n : ms << 22n).toString()
}

/** Compares two ids numerically without going through a JS number. */
export function compareIds(a: string, b: string): number {
  if (a.length !== b.length) return a.length < b.length ? -1 : 1
  return a < b ? -1 : a > b ? 1 : 0
}
