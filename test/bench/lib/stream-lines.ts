import type { IncomingMessage } from 'node:http'

/** Calls `onLine` with each `\r\n`-framed line of a streamed response, keep-alives (empty) skipped. */
export function onStreamLines(res: IncomingMessage, onLine: (line: string) => void): void {
  let buf = ''
  res.setEncoding('utf8')
  res.on('data', (chunk: string) => {
    buf += chunk
    let i: number
    while ((i = buf.indexOf('\r\n')) >= 0) {
      const line = buf.slice(0, i)
      buf = buf.slice(i + 2)
      if (line !== '') onLine(line)
    }
  })
}
