import { isId } from '@threadline/domain'
import type { Redis } from '@threadline/redis'

/** The newest Post the stream delivered that was queued, and when it was received (epoch ms). */
export interface StreamMark {
  id: string
  at: number
}

// Moves the mark only forward, comparing ids as digit strings (a Lua number loses 64-bit ids), so a
// replica that lost its lease and still queues a late batch can never move it back.
const ADVANCE = `
local cur = redis.call('hget', KEYS[1], 'id')
if cur and (#cur > #ARGV[1] or (#cur == #ARGV[1] and cur >= ARGV[1])) then return 0 end
redis.call('hset', KEYS[1], 'id', ARGV[1], 'at', ARGV[2])
return 1`

/** How long an upstream's refusal of `backfill_minutes` is remembered (a plan may change). */
const REFUSAL_TTL_S = 24 * 3_600

/**
 * The high-water mark of the upstream stream, in Redis so that whichever replica leads next knows
 * where the stream stopped (docs/architecture.md, "Recovery"); beside it, whether the upstream has
 * refused `backfill_minutes`.
 */
export class MarkStore {
  private readonly markKey: string
  private readonly refusedKey: string

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.markKey = `${prefix}:ingest:mark`
    this.refusedKey = `${prefix}:ingest:backfill-refused`
  }

  async read(): Promise<{ mark?: StreamMark; refused: boolean }> {
    const [fields, refused] = await Promise.all([
      this.redis.hgetall(this.markKey),
      this.redis.exists(this.refusedKey),
    ])
    const at = Number(fields.at)
    const mark = isId(fields.id) && Number.isFinite(at) ? { id: fields.id, at } : undefined
    return { mark, refused: refused === 1 }
  }

  async advance(mark: StreamMark): Promise<void> {
    await this.redis.eval(ADVANCE, 1, this.markKey, mark.id, String(mark.at))
  }

  async refuse(): Promise<void> {
    await this.redis.set(this.refusedKey, '1', 'EX', REFUSAL_TTL_S)
  }
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const DATA_OPEN = Buffer.from('{"data":{')

/** The index of the quote that closes the string whose first character is at `i`, or -1. */
function stringEnd(b: Buffer, i: number): number {
  for (; i < b.length; i++) {
    const c = b[i]
    if (c === BACKSLASH) i++
    else if (c === QUOTE) return i
  }
  return -1
}

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length && (b[i] === 0x20 || b[i] === 0x09 || b[i] === 0x0a || b[i] === 0x0d)) i++
  return i
}

/**
 * The `data.id` of a stream line without decoding the whole line: X and the simulator begin a Post
 * line with its `data` object, whose top-level keys are scanned for `id` (nested ids, of mentions or
 * referenced Posts, are skipped). Any other shape is parsed. Undefined when there is no valid id.
 */
export function postIdOfLine(line: Buffer): string | undefined {
  const n = DATA_OPEN.length
  if (line.length < n || DATA_OPEN.compare(line, 0, n) !== 0) return parsedId(line)
  let depth = 0
  for (let i = DATA_OPEN.length; i < line.length; i++) {
    const c = line[i]
    if (c === QUOTE) {
      const end = stringEnd(line, i + 1)
      if (end < 0) return undefined
      const isIdKey = depth === 0 && end === i + 3 && line[i + 1] === 0x69 && line[i + 2] === 0x64
      if (isIdKey) {
        let j = skipSpace(line, end + 1)
        if (line[j] === 0x3a) {
          j = skipSpace(line, j + 1)
          if (line[j] !== QUOTE) return undefined
          const close = stringEnd(line, j + 1)
          const id = close < 0 ? undefined : line.toString('latin1', j + 1, close)
          return isId(id) ? id : undefined
        }
      }
      i = end
    } else if (c === 0x7b || c === 0x5b) depth++
    else if (c === 0x7d || c === 0x5d) {
      if (depth === 0) return undefined
      depth--
    }
  }
  return undefined
}

function parsedId(line: Buffer): string | undefined {
  try {
    const parsed = JSON.parse(line.toString('utf8')) as { data?: { id?: unknown } }
    const id = parsed?.data?.id
    return isId(id) ? id : undefined
  } catch {
    return undefined
  }
}

/** The greatest Post id among stream lines (compared as 64-bit ids), if any has one. */
export function newestId(lines: readonly Buffer[]): string | undefined {
  let newest: string | undefined
  for (const line of lines) {
    const id = postIdOfLine(line)
    if (id === undefined) continue
    if (
      newest === undefined ||
      id.length > newest.length ||
      (id.length === newest.length && id > newest)
    )
      newest = id
  }
  return newest
}
