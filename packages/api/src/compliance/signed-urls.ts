import type { PageTokens } from '../page-token.js'

/** How long a job's URLs work (X's figures): upload 15 minutes, download 7 days. */
export const UPLOAD_URL_MS = 15 * 60_000
export const DOWNLOAD_URL_MS = 7 * 24 * 3_600_000

export type SignedPurpose = 'upload' | 'download'

/** What a signed URL's token says once checked. */
export type SignedCheck = { ok: true } | { ok: false; expired: Date | undefined }

const scope = (purpose: SignedPurpose, jobId: string) => `compliance-job ${purpose} ${jobId}`

/**
 * The tokens of a job's upload and download URLs (docs/api.md §8.1): the expiry time and an HMAC
 * over it, the job and the purpose, signed with the API's token secrets (page-token.ts), so they
 * need no Authorization header and work on every API instance; a rotation keeps them valid.
 */
export function createSignedUrls(tokens: PageTokens) {
  return {
    url(base: string, purpose: SignedPurpose, jobId: string, expiresAt: Date): string {
      const token = tokens.encode(scope(purpose, jobId), String(expiresAt.getTime()))
      return `${base}/2/compliance/jobs/${jobId}/${purpose}?token=${token}`
    },
    /** Checks a URL's token for the job at `now`: ok, expired (with when), or not ours. */
    check(purpose: SignedPurpose, jobId: string, token: string, now: Date): SignedCheck {
      const position = tokens.decode(scope(purpose, jobId), token)
      if (position === undefined || !/^\d{1,15}$/.test(position)) {
        return { ok: false, expired: undefined }
      }
      const expires = new Date(Number(position))
      return expires > now ? { ok: true } : { ok: false, expired: expires }
    },
  }
}

export type SignedUrls = ReturnType<typeof createSignedUrls>
