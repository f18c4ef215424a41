import { isId } from '@threadline/domain'

/** X's limits on one job's upload (docs/api.md §8.1). */
export const UPLOAD_MAX_IDS = 5_000_000
export const UPLOAD_MAX_BYTES = 100 * 1024 * 1024

/** Why an upload was refused, in words for the job's `error` and the PUT's answer. */
export class UploadRefusedError extends Error {
  constructor(
    message: string,
    /** 413 for the size limits, 400 for a line that is not an id. */
    readonly status: 400 | 413,
  ) {
    super(message)
    this.name = 'UploadRefusedError'
  }
}

/** A line longer than this cannot be an id (19 digits, a `\r`, some spaces): refused at once. */
const MAX_LINE_CHARS = 64

export interface UploadLimits {
  maxIds?: number
  maxBytes?: number
  /** Ids per chunk handed on (each chunk is staged as one row, then checked in one statement). */
  chunkIds: number
}

/**
 * The ids of an upload body (one a line, as X takes them), in chunks of `chunkIds`, read as the
 * body arrives so that memory holds one chunk whatever the upload's size. Blank lines are skipped,
 * `\r\n` and surrounding spaces tolerated. Throws UploadRefusedError at the first line that is not
 * an id, or once a limit is passed.
 */
export async function* uploadedIdChunks(
  body: AsyncIterable<Buffer | string>,
  limits: UploadLimits,
): AsyncGenerator<string[]> {
  const maxIds = limits.maxIds ?? UPLOAD_MAX_IDS
  const maxBytes = limits.maxBytes ?? UPLOAD_MAX_BYTES
  let bytes = 0
  let lineNo = 0
  let count = 0
  let rest = ''
  const chunk: string[] = []

  const take = (raw: string) => {
    lineNo += 1
    const line = raw.trim()
    if (line === '') return
    if (!isId(line)) {
      const text = raw.trim()
      const shown = text.length > 40 ? `${text.slice(0, 40)}…` : text
      throw new UploadRefusedError(
        `line ${lineNo} of the upload is not an id (one id of 1 to 19 digits a line): ${JSON.stringify(shown)}`,
        400,
      )
    }
    count += 1
    if (count > maxIds) {
      throw new UploadRefusedError(`the upload holds more than ${maxIds} ids`, 413)
    }
    chunk.push(line)
  }

  for await (const piece of body) {
    bytes += typeof piece === 'string' ? Buffer.byteLength(piece) : piece.length
    if (bytes > maxBytes) {
      throw new UploadRefusedError(`the upload is larger than ${maxBytes} bytes`, 413)
    }
    const text = rest + (typeof piece === 'string' ? piece : piece.toString('latin1'))
    let start = 0
    for (let nl = text.indexOf('\n'); nl >= 0; nl = text.indexOf('\n', start)) {
      take(text.slice(start, nl))
      start = nl + 1
    }
    rest = text.slice(start)
    if (rest.length > MAX_LINE_CHARS) {
      throw new UploadRefusedError(
        `line ${lineNo + 1} of the upload is not an id: it runs past ${MAX_LINE_CHARS} characters`,
        400,
      )
    }
    while (chunk.length >= limits.chunkIds) yield chunk.splice(0, limits.chunkIds)
  }
  if (rest !== '') take(rest)
  if (chunk.length > 0) yield chunk
}
