/**
 * The transfer URLs of X's batch compliance jobs: signed URLs of a storage bucket that take no
 * Authorization header (a bearer token sent there is refused), so these requests carry none.
 */

/** A whole upload or download, 100 MB at most, gets this long. */
const TRANSFER_TIMEOUT_MS = 10 * 60_000

/** The transfer's deadline, and the caller's stop (a leader stepping down) when given. */
const within = (signal?: AbortSignal) => {
  const timeout = AbortSignal.timeout(TRANSFER_TIMEOUT_MS)
  return signal ? AbortSignal.any([signal, timeout]) : timeout
}

export class ComplianceTransferError extends Error {
  override name = 'ComplianceTransferError'
}

/** `PUT` of the ids, one a line, as text/plain. */
export async function uploadIds(
  url: string,
  ids: readonly string[],
  signal?: AbortSignal,
): Promise<void> {
  const res = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'text/plain' },
    body: ids.join('\n') + '\n',
    signal: within(signal),
  })
  const text = await res.text()
  if (!res.ok) {
    throw new ComplianceTransferError(`upload answered ${res.status}: ${text.slice(0, 300)}`)
  }
}

/** The results of a complete job: its JSON lines, each parsed (a line that is not JSON as its text). */
export async function downloadResults(url: string, signal?: AbortSignal): Promise<unknown[]> {
  const res = await fetch(url, { signal: within(signal) })
  const text = await res.text()
  if (!res.ok) {
    throw new ComplianceTransferError(`download answered ${res.status}: ${text.slice(0, 300)}`)
  }
  const out: unknown[] = []
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    try {
      out.push(JSON.parse(line))
    } catch {
      out.push(line)
    }
  }
  return out
}
