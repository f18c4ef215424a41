/**
 * Sizes of CPU-heavy tests (property tests, generated data). The default size fits the time
 * budget below on a loaded 2-core CI box; `TEST_LARGE=1` (`pnpm test:large`) runs the large size,
 * with a budget to match.
 */
export const TEST_LARGE = /^(1|true)$/i.test(process.env.TEST_LARGE ?? '')

/** `small` runs by default, `large` under TEST_LARGE. */
export const testSize = (small: number, large: number): number => (TEST_LARGE ? large : small)

/** The time budget of a CPU-heavy test (vitest's default is 5 s, too little on a busy box). */
export const HEAVY_TEST_MS = TEST_LARGE ? 600_000 : 30_000
