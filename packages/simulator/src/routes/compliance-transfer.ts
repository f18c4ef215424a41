import type { IncomingMessage, ServerResponse } from 'node:http'
import type { ComplianceJobs } from '../compliance-jobs.js'

/** X's uploads take at most 5 M ids or 100 MB. */
const MAX_UPLOAD_BYTES = 100 * 1024 * 1024
const ID = /^[0-9]{1,19}$/

const answer = (res: ServerResponse, status: number, body: string, type = 'text/plain') => {
  res.statusCode = status
  res.setHeader('content-type', type)
  res.end(body)
}

/**
 * The signed transfer URLs of batch compliance jobs (on X, a storage bucket's): `PUT` of the ids
 * one a line, `GET` of the results as JSON lines. They need no Authorization header, and like a
 * signed URL they refuse one. Returns false for any other path.
 */
export async function complianceTransfer(
  jobs: ComplianceJobs,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
  search: URLSearchParams,
): Promise<boolean> {
  const m = /^\/_compliance\/(upload|download)\/(\d{1,19})$/.exec(path)
  if (!m) return false
  const which = m[1] as 'upload' | 'download'
  const method = req.method ?? 'GET'
  if (req.headers.authorization !== undefined) {
    req.resume()
    answer(res, 400, 'A signed URL takes no Authorization header.')
    return true
  }
  const job = jobs.byToken(m[2]!, search.get('token') ?? '', which)
  if (!job) {
    req.resume()
    answer(res, 403, 'The signature of this URL does not match.')
    return true
  }
  if (which === 'upload') {
    if (method !== 'PUT') {
      req.resume()
      answer(res, 405, 'Upload with PUT.')
      return true
    }
    if (jobs.status(job) !== 'created') {
      req.resume()
      answer(res, 400, `The job is ${jobs.status(job)}: it takes no upload.`)
      return true
    }
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of req) {
      const b = chunk as Buffer
      size += b.length
      if (size > MAX_UPLOAD_BYTES) {
        answer(res, 413, 'At most 100 MB of ids.')
        req.destroy()
        return true
      }
      chunks.push(b)
    }
    const ids = Buffer.concat(chunks)
      .toString('utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => ID.test(l))
    jobs.upload(job, ids)
    answer(res, 200, '')
    return true
  }
  if (method !== 'GET') {
    req.resume()
    answer(res, 405, 'Download with GET.')
    return true
  }
  if (jobs.takeDownloadFailure()) {
    answer(res, 503, 'Service unavailable (injected).')
    return true
  }
  if (jobs.status(job) !== 'complete') {
    answer(res, 404, `The job is ${jobs.status(job)}: no results yet.`)
    return true
  }
  answer(res, 200, jobs.results(job), 'application/json')
  return true
}
