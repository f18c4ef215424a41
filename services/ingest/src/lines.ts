export class LineTooLongError extends Error {
  override name = 'LineTooLongError'
  constructor(readonly limit: number) {
    super(`the upstream sent a line longer than ${limit} characters without \\r\\n`)
  }
}

/**
 * Splits a byte stream into lines on `\r\n` (the filtered stream's delimiter). Decodes UTF-8 across
 * chunk boundaries. A final line without its `\r\n` is kept until `end()`. A line may not grow past
 * `maxLineLength` (memory stays bounded whatever the upstream sends): push() then throws
 * LineTooLongError, and the reader drops the connection.
 */
export class LineSplitter {
  private readonly decoder = new TextDecoder('utf-8')
  private rest = ''

  constructor(private readonly maxLineLength = 16 * 1024 * 1024) {}

  push(chunk: Uint8Array | string): string[] {
    const text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true })
    if (text.length === 0) return []
    const buffer = this.rest + text
    const lines: string[] = []
    let start = 0
    // Only the new text can hold a delimiter, plus a `\r` left at the end of the previous chunk
    // pairing with a `\n` at the start of this one: a long line is not rescanned chunk after chunk.
    let from = Math.max(0, this.rest.length - 1)
    for (;;) {
      const at = buffer.indexOf('\r\n', from)
      if (at < 0) break
      lines.push(buffer.slice(start, at))
      start = at + 2
      from = start
    }
    this.rest = buffer.slice(start)
    if (this.rest.length > this.maxLineLength) {
      this.rest = ''
      throw new LineTooLongError(this.maxLineLength)
    }
    return lines
  }

  /** The unterminated remainder (a connection cut mid-line), if any. */
  end(): string | undefined {
    const tail = this.rest + this.decoder.decode()
    this.rest = ''
    return tail.length > 0 ? tail : undefined
  }
}
