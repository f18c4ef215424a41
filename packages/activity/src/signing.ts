import { createHmac } from 'node:crypto'

/** `sha256=` + base64 HMAC-SHA256 of `data` under the app's consumer secret (docs/api.md §4.3). */
export function signature(secret: string, data: string): string {
  return `sha256=${createHmac('sha256', secret).update(data, 'utf8').digest('base64')}`
}

export const SIGNATURE_HEADER = 'x-twitter-webhooks-signature'
