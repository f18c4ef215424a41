/**
 * A small seeded PRNG (sfc32). Math.random cannot be seeded, and the world must be reproducible
 * from a seed so that tests and benchmarks see the same conversations every run.
 */
export class Prng {
  private a: number
  private b: number
  private c: number
  private d: number

  constructor(seed: number) {
    // splitmix32 spreads a small integer seed over the four words of state.
    let s = seed >>> 0
    const next = () => {
      s = (s + 0x9e3779b9) | 0
      let z = s
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b)
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35)
      return (z ^ (z >>> 16)) >>> 0
    }
    this.a = next()
    this.b = next()
    this.c = next()
    this.d = next()
    for (let i = 0; i < 12; i++) this.next()
  }

  /** A float in [0, 1). */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0
    this.d = (this.d + 1) | 0
    this.a = this.b ^ (this.b >>> 9)
    this.b = (this.c + (this.c << 3)) | 0
    this.c = (this.c << 21) | (this.c >>> 11)
    this.c = (this.c + t) | 0
    return (t >>> 0) / 4294967296
  }

  /** An integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1))
  }

  chance(p: number): boolean {
    return this.next() < p
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)] as T
  }

  /** An index in [0, n) skewed towards 0: a few items get most of the picks (heavy tail). */
  skewed(n: number, power = 3): number {
    return Math.min(n - 1, Math.floor(n * Math.pow(this.next(), power)))
  }

  /** An exponentially distributed value with the given mean (gaps of a Poisson process). */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean
  }

  /** A Pareto-distributed integer ≥ 1: most small, a few very large (metrics, follower counts). */
  pareto(alpha: number, scale = 1): number {
    return Math.floor(scale / Math.pow(1 - this.next(), 1 / alpha))
  }
}
