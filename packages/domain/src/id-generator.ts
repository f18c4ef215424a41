import { randomInt } from 'node:crypto'

const TWEPOCH = 1288834974657n
// 10 bits of "worker" chosen at random per process: collisions need the same millisecond, the same
// worker bits and the same sequence number.
const WORKER = BigInt(randomInt(1024))
let lastMs = 0n
let sequence = 0n

/**
 * A new snowflake id (time, 10 random worker bits, 12-bit sequence) as X makes them: time-ordered,
 * 64-bit, returned as a decimal string. Used for apps, tokens, rules, subscriptions and webhooks.
 */
export function generateId(now: number = Date.now()): string {
  let ms = BigInt(now) - TWEPOCH
  if (ms < lastMs) ms = lastMs
  if (ms === lastMs) {
    sequence = (sequence + 1n) & 4095n
    if (sequence === 0n) ms += 1n // 4096 ids in one millisecond: borrow the next one
  } else {
    sequence = 0n
  }
  lastMs = ms
  return ((ms << 22n) | (WORKER << 12n) | sequence).toString()
}
