import type { Redis } from '@threadline/redis'

// Moves a mark only forward (event times in epoch ms, well within a Lua number's exact range).
const ADVANCE = `
local cur = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if cur and cur >= tonumber(ARGV[2]) then return 0 end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
return 1`

/**
 * The newest `event_at` queued from each compliance stream partition (`tweet-1` … `user-4`), in
 * Redis like the filtered stream's mark (stream-mark.ts), so a new leader replays from it.
 */
export class ComplianceMarks {
  readonly key: string

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.key = `${prefix}:ingest:compliance-mark`
  }

  async read(stream: string): Promise<number | undefined> {
    const v = await this.redis.hget(this.key, stream)
    const n = v === null ? NaN : Number(v)
    return Number.isFinite(n) ? n : undefined
  }

  async advance(stream: string, eventAtMs: number): Promise<void> {
    await this.redis.eval(ADVANCE, 1, this.key, stream, String(eventAtMs))
  }
}
