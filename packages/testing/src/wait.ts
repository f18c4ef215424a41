/**
 * Polls `check` until it returns a value other than undefined/false, or fails after `timeoutMs`
 * with `what` and the last value seen. Tests wait on conditions with deadlines, never on sleeps.
 */
export async function waitFor<T>(
  what: string,
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 20_000, intervalMs = 50 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  for (;;) {
    try {
      const value = await check()
      if (value !== undefined && value !== false) return value
      last = value
    } catch (err) {
      last = err
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(last)})`)
    }
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}
