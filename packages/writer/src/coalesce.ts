/**
 * One pass of `run` at a time. A call during a pass joins it and schedules one more pass after it,
 * with the smallest minimum age any joining caller asked for (a caller that wants everything must
 * not inherit a periodic pass's "skip young rows"). Resolves with the total of all passes.
 */
export function coalesced(
  run: (minAgeMs: number) => Promise<number>,
): (minAgeMs?: number) => Promise<number> {
  let running: Promise<number> | undefined
  let again: number | undefined
  return (minAgeMs = 0) => {
    if (running) {
      again = Math.min(again ?? Infinity, minAgeMs)
      return running
    }
    running = (async () => {
      let total = 0
      let age: number | undefined = minAgeMs
      while (age !== undefined) {
        again = undefined
        total += await run(age)
        age = again
      }
      return total
    })().finally(() => {
      running = undefined
    })
    return running
  }
}
