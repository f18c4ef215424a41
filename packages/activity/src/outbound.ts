import { lookup as dnsLookup, type LookupAddress } from 'node:dns'
import http from 'node:http'
import https from 'node:https'
import { isIP } from 'node:net'
import { forbiddenAddressReason } from './address-policy.js'

/** Why a webhook URL was refused or a request to it failed; `message` is safe to show its owner. */
export class WebhookRequestError extends Error {
  constructor(
    message: string,
    /** `refused`: the URL or its address is not allowed (no request was made). */
    readonly kind: 'refused' | 'network' | 'timeout' | 'redirect' | 'too-large',
  ) {
    super(message)
    this.name = 'WebhookRequestError'
  }
}

export interface OutboundPolicy {
  /** WEBHOOK_ALLOW_PRIVATE: lets webhooks use plain http and private/loopback addresses. */
  allowPrivate: boolean
}

export interface OutboundOptions extends OutboundPolicy {
  method: 'GET' | 'POST'
  headers?: Record<string, string>
  body?: string
  /** The whole exchange must finish within this (docs/api.md §4.3: 10 s). */
  timeoutMs: number
  /** Response bytes kept; a longer body is cut off and the request fails. */
  maxResponseBytes: number
  /** Name resolution, replaceable in tests (a hostname that resolves to loopback). */
  lookup?: typeof dnsLookup
}

export interface OutboundResponse {
  status: number
  body: string
  /** The address the request went to (resolved once, checked, then used). */
  address: string
}

/** The URL, parsed, when its form is allowed: https (or http when private targets are allowed). */
export function parseWebhookUrl(raw: string, policy: OutboundPolicy): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new WebhookRequestError('The webhook URL is not a valid URL.', 'refused')
  }
  const allowed = policy.allowPrivate ? ['https:', 'http:'] : ['https:']
  if (!allowed.includes(url.protocol)) {
    throw new WebhookRequestError('The webhook URL must use https.', 'refused')
  }
  if (url.username || url.password) {
    throw new WebhookRequestError('The webhook URL must not carry credentials.', 'refused')
  }
  return url
}

/**
 * Resolves the URL's host once and checks every address; returns the one to connect to. Checking
 * all of them (and then pinning the request to the checked one) closes DNS rebinding: the name is
 * not resolved again between the check and the connection.
 */
export async function resolveWebhookAddress(
  url: URL,
  policy: OutboundPolicy,
  lookup: typeof dnsLookup = dnsLookup,
): Promise<{ address: string; family: 4 | 6 }> {
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  let addresses: LookupAddress[]
  if (isIP(host)) {
    addresses = [{ address: host, family: isIP(host) }]
  } else {
    addresses = await new Promise<LookupAddress[]>((resolve, reject) => {
      lookup(host, { all: true, verbatim: true }, (err, result) => {
        if (err)
          reject(new WebhookRequestError(`The webhook host ${host} does not resolve.`, 'network'))
        else resolve(result)
      })
    })
    if (addresses.length === 0) {
      throw new WebhookRequestError(`The webhook host ${host} does not resolve.`, 'network')
    }
  }
  if (!policy.allowPrivate) {
    for (const a of addresses) {
      const reason = forbiddenAddressReason(a.address)
      if (reason) {
        throw new WebhookRequestError(
          `The webhook URL resolves to a forbidden address (${reason}).`,
          'refused',
        )
      }
    }
  }
  const first = addresses[0]!
  return { address: first.address, family: first.family === 6 ? 6 : 4 }
}

/**
 * One request to a webhook, with the safety rules of docs/api.md §4.3: allowed scheme, the address
 * checked after resolution and pinned for the connection, no redirect followed (a 3xx fails), a
 * deadline over the whole exchange, and the response body read only up to a cap.
 */
export async function webhookRequest(
  rawUrl: string,
  options: OutboundOptions,
): Promise<OutboundResponse> {
  const url = parseWebhookUrl(rawUrl, options)
  const deadline = Date.now() + options.timeoutMs
  const target = await resolveWebhookAddress(url, options, options.lookup)
  const remaining = deadline - Date.now()
  if (remaining <= 0)
    throw new WebhookRequestError('The webhook did not answer in time.', 'timeout')
  const transport = url.protocol === 'https:' ? https : http
  const body = options.body === undefined ? undefined : Buffer.from(options.body, 'utf8')
  return new Promise<OutboundResponse>((resolve, reject) => {
    let settled = false
    const finish = (err: Error | undefined, value?: OutboundResponse) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      if (err) reject(err)
      else resolve(value!)
    }
    const req = transport.request(
      {
        method: options.method,
        protocol: url.protocol,
        hostname: url.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: url.port || undefined,
        path: `${url.pathname}${url.search}`,
        headers: {
          'user-agent': 'Threadline-Webhooks/1.0',
          ...(body
            ? {
                'content-type': 'application/json; charset=utf-8',
                'content-length': String(body.length),
              }
            : {}),
          ...options.headers,
        },
        // The connection goes to the address checked above, never to a fresh resolution; TLS still
        // verifies the certificate against the URL's host name.
        lookup: (_host, opts, cb) => {
          const all = (opts as { all?: boolean }).all
          if (all) (cb as (e: null, a: LookupAddress[]) => void)(null, [target])
          else (cb as (e: null, a: string, f: number) => void)(null, target.address, target.family)
        },
        agent: false,
      },
      (res) => {
        const status = res.statusCode ?? 0
        if (status >= 300 && status < 400) {
          res.destroy()
          finish(
            new WebhookRequestError(
              `The webhook answered ${status}; redirects are not followed.`,
              'redirect',
            ),
          )
          return
        }
        const chunks: Buffer[] = []
        let size = 0
        res.on('data', (chunk: Buffer) => {
          size += chunk.length
          if (size > options.maxResponseBytes) {
            res.destroy()
            finish(
              new WebhookRequestError(
                `The webhook's response passed ${options.maxResponseBytes} bytes.`,
                'too-large',
              ),
            )
            return
          }
          chunks.push(chunk)
        })
        res.on('end', () =>
          finish(undefined, {
            status,
            body: Buffer.concat(chunks).toString('utf8'),
            address: target.address,
          }),
        )
        res.on('error', (err) =>
          finish(
            new WebhookRequestError(`The webhook connection failed: ${err.message}`, 'network'),
          ),
        )
      },
    )
    const timer = setTimeout(() => {
      req.destroy()
      finish(new WebhookRequestError('The webhook did not answer in time.', 'timeout'))
    }, remaining)
    req.on('error', (err) =>
      finish(new WebhookRequestError(`The webhook connection failed: ${err.message}`, 'network')),
    )
    req.end(body)
  })
}
