/**
 * Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`
 * with `what` and the last value seen. Tests wait on conditions with deadlines, never on sleeps.
 * A check that returns 0 is refused at once: it is almost always a count that "succeeds" while
 * still empty (a stream test once waited for nothing that way); compare it (`n > 0`) instead.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 20_000, intervalMs = 50 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    let value: T | undefined | false
    try {
      value = await check()
      last = value
    } catch (err) {
      last = err
      value = undefined
    }
    if (value === 0) {
      throw new TypeError(`waitFor(${what}): the check returned 0; return a comparison (n > 0)`)
    }
    if (value !== undefined && value !== false) return value
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`)
    }
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}
