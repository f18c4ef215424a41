import { describe, expect, it } from 'vitest'
import { median, parseFigures, summarizeRuns } from './runs.js'

describe('summarizeRuns', () => {
  it('reports the median ratio, the spread and the runs at target', () => {
    const runs = [0.52, 0.36, 0.71, 0.49, 0.55].map((ratio, i) => ({
      ratio,
      rows_per_s: 1000 + i,
      target_ratio: 0.5,
    }))
    const s = summarizeRuns('pipeline', runs)
    expect(s).toMatchObject({
      bench: 'pipeline',
      runs: 5,
      ratio: 0.52,
      ratio_min: 0.36,
      ratio_max: 0.71,
      ratios: [0.52, 0.36, 0.71, 0.49, 0.55],
      target_ratio: 0.5,
      at_target: 3,
    })
    expect(s.median_run).toEqual({ ratio: 0.52, rows_per_s: 1000, target_ratio: 0.5 })
  })

  it('takes the mean of the middle two for an even count, and names the lower run', () => {
    const s = summarizeRuns('api', [{ ratio: 0.8 }, { ratio: 0.4 }, { ratio: 0.5 }, { ratio: 0.6 }])
    expect(s.ratio).toBe(0.55)
    expect(s.median_run).toEqual({ ratio: 0.5 })
    expect(s).not.toHaveProperty('at_target')
  })

  it('refuses nothing to summarize', () => {
    expect(() => summarizeRuns('pipeline', [])).toThrow(/no runs/)
  })
})

describe('parseFigures', () => {
  it('reads a last line with a numeric ratio, and nothing else', () => {
    expect(parseFigures('{"bench":"x","ratio":0.5}')).toEqual({ bench: 'x', ratio: 0.5 })
    expect(parseFigures('pipeline 6000 Posts/s')).toBeUndefined()
    expect(parseFigures('{"ratio":"0.5"}')).toBeUndefined()
    expect(parseFigures('[1]')).toBeUndefined()
  })
})

describe('median', () => {
  it('takes the middle value, or the mean of the middle two, whatever the order', () => {
    expect(median([3, 1, 2])).toBe(2)
    expect(median([4, 1, 3, 2])).toBe(2.5)
    expect(median([7])).toBe(7)
  })
})
