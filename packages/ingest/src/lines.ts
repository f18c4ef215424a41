export class LineTooLongError extends Error {
  override name = 'LineTooLongError'
  constructor(readonly limit: number) {
    super(`the upstream sent a line longer than ${limit} bytes without \\r\\n`)
  }
}

const CR = 0x0d
const LF = 0x0a

/**
 * Splits a byte stream into lines on `\r\n` (the filtered stream's delimiter), as bytes: a line is
 * never decoded here, because the queue takes it as the upstream sent it (the writer decodes it,
 * once). A line inside one chunk is a view of that chunk, not a copy; only a line spanning chunks
 * is copied, once, when its end arrives. A final line without its `\r\n` is kept until `end()`. A
 * line may not grow past `maxLineLength` bytes (memory stays bounded whatever the upstream sends):
 * push() then throws LineTooLongError, and the reader drops the connection.
 */
export class LineSplitter {
  /** The unterminated line so far, in the chunks it came in. */
  private pending: Buffer[] = []
  private pendingLength = 0

  constructor(private readonly maxLineLength = 16 * 1024 * 1024) {}

  push(chunk: Uint8Array | string): Buffer[] {
    const bytes =
      typeof chunk === 'string'
        ? Buffer.from(chunk, 'utf8')
        : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    if (bytes.length === 0) return []
    const lines: Buffer[] = []
    let start = 0
    // A `\r` ending the previous chunk and a `\n` starting this one.
    if (this.pendingLength > 0 && bytes[0] === LF) {
      const last = this.pending[this.pending.length - 1]!
      if (last[last.length - 1] === CR) {
        lines.push(this.takePending(-1))
        start = 1
      }
    }
    for (;;) {
      const at = bytes.indexOf('\r\n', start)
      if (at < 0) break
      if (this.pendingLength > 0) {
        this.pending.push(bytes.subarray(start, at))
        this.pendingLength += at - start
        lines.push(this.takePending(0))
      } else {
        lines.push(bytes.subarray(start, at))
      }
      start = at + 2
    }
    if (start < bytes.length) {
      this.pending.push(bytes.subarray(start))
      this.pendingLength += bytes.length - start
      if (this.pendingLength > this.maxLineLength) {
        this.pending = []
        this.pendingLength = 0
        throw new LineTooLongError(this.maxLineLength)
      }
    }
    return lines
  }

  /** The unterminated remainder (a connection cut mid-line), if any. */
  end(): Buffer | undefined {
    return this.pendingLength > 0 ? this.takePending(0) : undefined
  }

  /** The pending chunks as one line, less `trim` bytes at its end (0 or -1). */
  private takePending(trim: 0 | -1): Buffer {
    const joined =
      this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingLength)
    this.pending = []
    this.pendingLength = 0
    return trim === 0 ? joined : joined.subarray(0, joined.length + trim)
  }
}
