/**
 * What a `waitFor` check answers: `true` when the condition holds, and only then; otherwise a
 * reason (a string, or a thrown error; `false` or undefined say nothing) that keeps it waiting and
 * is named if the deadline passes. A check that returned any truthy value once let
 * `` `${n} missing` `` pass as success.
 */
type Answer = boolean | string | undefined
export type Check = () => Answer | Promise<Answer>

export interface WaitOptions {
  timeoutMs?: number
  intervalMs?: number
}

/** The result of one check: done, or the reason it is not. */
async function attempt<T>(
  step: () => T | Promise<T>,
  done: (value: T) => boolean,
): Promise<{ done: true; value: T } | { done: false; reason: unknown }> {
  let value: T
  try {
    value = await step()
  } catch (err) {
    return { done: false, reason: err }
  }
  if (done(value)) return { done: true, value }
  return { done: false, reason: value }
}

async function poll<T>(
  what: string,
  step: () => T | Promise<T>,
  done: (value: T) => boolean,
  { timeoutMs = 20_000, intervalMs = 50 }: WaitOptions,
): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const result = await attempt(step, done)
    if (result.done) return result.value
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what} (last: ${String(result.reason)})`,
      )
    }
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

/**
 * Polls `check` until it returns `true`, or fails after `timeoutMs` naming `what` and the last
 * reason given. Tests wait on conditions with deadlines, never on sleeps. A check that returns
 * anything else (a count, an object) is refused at once: compare it, or use waitForValue.
 */
export async function waitFor(what: string, check: Check, options: WaitOptions = {}) {
  await poll(
    what,
    check,
    (value: unknown) => {
      if (value === true) return true
      if (typeof value === 'string' || value === false || value === undefined) return false
      throw new TypeError(
        `waitFor(${what}): the check returned ${String(value)}; return true, or a string saying ` +
          'what is still missing',
      )
    },
    options,
  )
}

/**
 * Polls `get` until it returns an object (rows, a parsed body…) and returns it; undefined or null,
 * or a thrown error (named on timeout), keeps it waiting. Only objects count, so that a string
 * meant as a reason can never pass as the value.
 */
export async function waitForValue<T extends object>(
  what: string,
  get: () => T | undefined | null | Promise<T | undefined | null>,
  options: WaitOptions = {},
): Promise<T> {
  const value = await poll(
    what,
    get,
    (v: unknown) => {
      if (v === undefined || v === null) return false
      if (typeof v === 'object') return true
      throw new TypeError(`waitForValue(${what}): got ${String(v)}, which is not an object`)
    },
    options,
  )
  return value!
}
