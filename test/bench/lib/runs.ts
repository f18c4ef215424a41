/**
 * `pnpm bench <name> --runs N`: what N runs of one benchmark say together. Each run measures its
 * own baseline, so each ratio stands alone; on a shared machine they spread (a run's baseline may
 * meet a quicker or slower machine than the run itself did), and one run's ratio says little.
 */

/** A benchmark's last line: its figures, `ratio` among them. */
export type Figures = Record<string, unknown> & { ratio: number }

export interface RunsSummary {
  bench: string
  runs: number
  /** The median of the runs' ratios (the mean of the middle two for an even count). */
  ratio: number
  ratio_min: number
  ratio_max: number
  /** Each run's ratio, in the order they ran. */
  ratios: number[]
  /** With the benchmark's `target_ratio`: how many runs reached it. */
  target_ratio?: number
  at_target?: number
  /** The figures of the run whose ratio is the median (the lower middle for an even count). */
  median_run: Figures
}

/** Reads a benchmark's last line; undefined unless it is a JSON object with a numeric `ratio`. */
export function parseFigures(line: string): Figures | undefined {
  try {
    const value: unknown = JSON.parse(line)
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined
    const ratio = (value as { ratio?: unknown }).ratio
    return typeof ratio === 'number' && Number.isFinite(ratio) ? (value as Figures) : undefined
  } catch {
    return undefined
  }
}

/** The middle value (the mean of the middle two for an even count); NaN for none. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The p-th percentile of values already sorted ascending (nearest rank); NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

export function summarizeRuns(bench: string, runs: readonly Figures[]): RunsSummary {
  if (runs.length === 0) throw new Error('no runs to summarize')
  const sorted = [...runs].sort((a, b) => a.ratio - b.ratio)
  const mid = (sorted.length - 1) >> 1
  const ratio = median(runs.map((r) => r.ratio))
  const target = runs[0]!.target_ratio
  return {
    bench,
    runs: runs.length,
    ratio: Math.round(ratio * 1000) / 1000,
    ratio_min: sorted[0]!.ratio,
    ratio_max: sorted[sorted.length - 1]!.ratio,
    ratios: runs.map((r) => r.ratio),
    ...(typeof target === 'number'
      ? { target_ratio: target, at_target: runs.filter((r) => r.ratio >= target).length }
      : {}),
    median_run: sorted[mid]!,
  }
}
