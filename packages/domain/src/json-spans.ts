import { isUtf8 } from 'node:buffer'

/**
 * Where a stream line's or page's wire objects sit in its UTF-8 bytes: each Post of `data` (one
 * object, or each element of a list) and each element of `includes.users` and `includes.tweets`,
 * as views of `bytes`. The writer stores and publishes these bytes as the objects' JSON, where it
 * would otherwise serialize each parsed object again.
 *
 * Only for text that JSON.parse has accepted already: the scanner checks structure, not validity.
 * Where the line's shape is not the one expected (no object at the top, a key written with an
 * escape, which JSON.parse would decode and this does not), it gives up: undefined, and the caller
 * serializes as before. Later duplicate keys win, as in JSON.parse. It gives up as well on bytes
 * that are not UTF-8: decoded, they became other text (U+FFFD in place of each bad sequence), so
 * their views would not be the objects that were parsed, and Postgres refuses them as text.
 */
export interface LineSpans {
  /** `data`'s Posts: one for an object, one per element for a list; undefined if neither. */
  data: Uint8Array[] | undefined
  users: Uint8Array[] | undefined
  tweets: Uint8Array[] | undefined
}

const QUOTE = 0x22
const BACKSLASH = 0x5c
const OPEN_OBJECT = 0x7b
const CLOSE_OBJECT = 0x7d
const OPEN_ARRAY = 0x5b
const CLOSE_ARRAY = 0x5d
const COMMA = 0x2c
const COLON = 0x3a

class GiveUp extends Error {}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09
}

class Scanner {
  constructor(readonly bytes: Uint8Array) {}

  space(at: number): number {
    const b = this.bytes
    while (at < b.length && isSpace(b[at]!)) at++
    return at
  }

  /** `at` is an opening quote; returns the index after the closing one. */
  string(at: number): number {
    const b = this.bytes
    let quote = b.indexOf(QUOTE, at + 1)
    for (;;) {
      if (quote < 0) throw new GiveUp()
      // Escaped when an odd number of backslashes precede it.
      let slashes = 0
      while (b[quote - 1 - slashes] === BACKSLASH) slashes++
      if (slashes % 2 === 0) return quote + 1
      quote = b.indexOf(QUOTE, quote + 1)
    }
  }

  /** Returns the index after the value that starts at `at` (no leading space). */
  value(at: number): number {
    const b = this.bytes
    const first = b[at]
    if (first === QUOTE) return this.string(at)
    if (first === OPEN_OBJECT || first === OPEN_ARRAY) {
      let depth = 0
      for (let i = at; i < b.length; i++) {
        const c = b[i]!
        if (c === QUOTE) {
          i = this.string(i) - 1
        } else if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
          depth++
        } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
          if (--depth === 0) return i + 1
        }
      }
      throw new GiveUp()
    }
    // A number, true, false or null: up to the next delimiter.
    let i = at
    while (i < b.length) {
      const c = b[i]!
      if (c === COMMA || c === CLOSE_OBJECT || c === CLOSE_ARRAY || isSpace(c)) break
      i++
    }
    if (i === at) throw new GiveUp()
    return i
  }

  /**
   * Calls `member` with each key (its bytes between the quotes) and the value's start of the
   * object at `at`; `member` returns the index after the value. Returns the index after the object.
   */
  members(at: number, member: (key: Uint8Array, valueAt: number) => number): number {
    const b = this.bytes
    if (b[at] !== OPEN_OBJECT) throw new GiveUp()
    let i = this.space(at + 1)
    if (b[i] === CLOSE_OBJECT) return i + 1
    for (;;) {
      if (b[i] !== QUOTE) throw new GiveUp()
      const keyEnd = this.string(i)
      const key = b.subarray(i + 1, keyEnd - 1)
      if (key.includes(BACKSLASH)) throw new GiveUp()
      i = this.space(keyEnd)
      if (b[i] !== COLON) throw new GiveUp()
      i = this.space(member(key, this.space(i + 1)))
      if (b[i] === CLOSE_OBJECT) return i + 1
      if (b[i] !== COMMA) throw new GiveUp()
      i = this.space(i + 1)
    }
  }

  /** The elements of the array at `at`, as views. Returns them and the index after the array. */
  elements(at: number): { spans: Uint8Array[]; end: number } {
    const b = this.bytes
    const spans: Uint8Array[] = []
    let i = this.space(at + 1)
    if (b[i] === CLOSE_ARRAY) return { spans, end: i + 1 }
    for (;;) {
      const end = this.value(i)
      spans.push(b.subarray(i, end))
      i = this.space(end)
      if (b[i] === CLOSE_ARRAY) return { spans, end: i + 1 }
      if (b[i] !== COMMA) throw new GiveUp()
      i = this.space(i + 1)
    }
  }
}

function keyIs(key: Uint8Array, name: string): boolean {
  if (key.length !== name.length) return false
  for (let i = 0; i < key.length; i++) if (key[i] !== name.charCodeAt(i)) return false
  return true
}

/** See LineSpans. `bytes` must be text that JSON.parse accepted. */
export function lineSpans(bytes: Uint8Array): LineSpans | undefined {
  if (!isUtf8(bytes)) return undefined
  const scan = new Scanner(bytes)
  const spans: LineSpans = { data: undefined, users: undefined, tweets: undefined }
  try {
    const start = scan.space(0)
    const end = scan.members(start, (key, at) => {
      if (keyIs(key, 'data')) {
        if (bytes[at] === OPEN_ARRAY) {
          const { spans: posts, end } = scan.elements(at)
          spans.data = posts
          return end
        }
        const end = scan.value(at)
        spans.data = bytes[at] === OPEN_OBJECT ? [bytes.subarray(at, end)] : undefined
        return end
      }
      if (keyIs(key, 'includes')) {
        spans.users = spans.tweets = undefined
        if (bytes[at] !== OPEN_OBJECT) return scan.value(at)
        return scan.members(at, (name, valueAt) => {
          const field = keyIs(name, 'users')
            ? 'users'
            : keyIs(name, 'tweets')
              ? 'tweets'
              : undefined
          if (field === undefined) return scan.value(valueAt)
          if (bytes[valueAt] !== OPEN_ARRAY) {
            spans[field] = undefined
            return scan.value(valueAt)
          }
          const { spans: list, end } = scan.elements(valueAt)
          spans[field] = list
          return end
        })
      }
      return scan.value(at)
    })
    if (scan.space(end) !== bytes.length) return undefined
    return spans
  } catch (err) {
    if (err instanceof GiveUp) return undefined
    throw err
  }
}
