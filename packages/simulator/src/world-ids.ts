/** X's snowflake epoch, in ms. */
const TWEPOCH = 1288834974657

/** A snowflake id: milliseconds since X's epoch, a 10-bit worker and a 12-bit sequence. */
export function snowflake(ms: number, worker: bigint, seq: number): string {
  return ((BigInt(ms - TWEPOCH) << 22n) | (worker << 12n) | BigInt(seq)).toString()
}

/** Post ids in creation order: never behind the last one, a sequence of 4096 per millisecond. */
export class SnowflakeClock {
  private lastMs = 0
  private seq = 0

  constructor(private readonly worker: bigint) {}

  /** The next id at `ms`, or just after the last when that is later; `ms` is the id's time. */
  next(ms: number): { id: string; ms: number } {
    if (ms < this.lastMs) ms = this.lastMs
    if (ms === this.lastMs) {
      this.seq++
      if (this.seq > 4095) {
        ms++
        this.seq = 0
      }
    } else this.seq = 0
    this.lastMs = ms
    return { id: snowflake(ms, this.worker, this.seq), ms }
  }
}
