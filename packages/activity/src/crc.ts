import { randomBytes } from 'node:crypto'
import { webhookRequest, WebhookRequestError, type OutboundOptions } from './outbound.js'
import { signature } from './signing.js'

export interface CrcOptions extends Pick<OutboundOptions, 'allowPrivate' | 'lookup'> {
  timeoutMs: number
  maxResponseBytes: number
}

export type CrcResult = { ok: true } | { ok: false; reason: string; refused: boolean }

/**
 * X's challenge-response check: `GET <url>?crc_token=T` must answer
 * `{"response_token":"sha256=" + base64(HMAC-SHA256(secret, T))}` with a 2xx.
 */
export async function runCrc(
  rawUrl: string,
  secret: string,
  options: CrcOptions,
): Promise<CrcResult> {
  const token = randomBytes(24).toString('base64url')
  let target: URL
  try {
    target = new URL(rawUrl)
  } catch {
    return { ok: false, reason: 'The webhook URL is not a valid URL.', refused: true }
  }
  target.searchParams.set('crc_token', token)
  try {
    const res = await webhookRequest(target.toString(), { ...options, method: 'GET' })
    if (res.status < 200 || res.status >= 300) {
      return { ok: false, reason: `The CRC request answered ${res.status}.`, refused: false }
    }
    let parsed: unknown
    try {
      parsed = JSON.parse(res.body)
    } catch {
      return { ok: false, reason: 'The CRC response is not JSON.', refused: false }
    }
    const given = (parsed as { response_token?: unknown } | null)?.response_token
    if (given !== signature(secret, token)) {
      return { ok: false, reason: 'The CRC response_token is wrong.', refused: false }
    }
    return { ok: true }
  } catch (err) {
    if (err instanceof WebhookRequestError) {
      return { ok: false, reason: err.message, refused: err.kind === 'refused' }
    }
    throw err
  }
}
