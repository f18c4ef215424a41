/**
 * Splits a byte stream into lines on `\r\n` (the filtered stream's delimiter). Decodes UTF-8 across
 * chunk boundaries. A final line without its `\r\n` is kept until `end()`.
 */
export class LineSplitter {
  private readonly decoder = new TextDecoder('utf-8')
  private rest = ''

  push(chunk: Uint8Array | string): string[] {
    const text = typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true })
    if (text.length === 0) return []
    // A `\r` at the end of the previous chunk may pair with a `\n` at the start of this one.
    const buffer = this.rest + text
    const lines: string[] = []
    let start = 0
    for (;;) {
      const at = buffer.indexOf('\r\n', start)
      if (at < 0) break
      lines.push(buffer.slice(start, at))
      start = at + 2
    }
    this.rest = buffer.slice(start)
    return lines
  }

  /** The unterminated remainder (a connection cut mid-line), if any. */
  end(): string | undefined {
    const tail = this.rest + this.decoder.decode()
    this.rest = ''
    return tail.length > 0 ? tail : undefined
  }
}
