/** X's problem bodies, and the errors the routes throw to produce them (one handler renders all). */

export const PROBLEM_BASE = 'https://api.twitter.com/2/problems/'

export interface InvalidParameter {
  parameters: Record<string, string[]>
  message: string
}

export interface Problem {
  title: string
  type: string
  status?: number
  detail?: string
  [key: string]: unknown
}

/** A response other than 2xx, already in X's shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
  ) {
    super(String(body.detail ?? body.title ?? status))
    this.name = 'ApiError'
  }
}

export class InvalidRequestError extends ApiError {
  constructor(readonly errors: InvalidParameter[]) {
    super(400, {
      errors,
      title: 'Invalid Request',
      detail: 'One or more parameters to your request was invalid.',
      type: `${PROBLEM_BASE}invalid-request`,
    })
    this.name = 'InvalidRequestError'
  }
}

export function invalidRequest(name: string, values: string[], message: string) {
  return new InvalidRequestError([{ parameters: { [name]: values }, message }])
}

function simple(status: number, title: string, detail: string, type = 'about:blank') {
  return { title, type, status, detail }
}

export const unauthorized = () => new ApiError(401, simple(401, 'Unauthorized', 'Unauthorized'))
export const tooManyRequests = () =>
  new ApiError(429, simple(429, 'Too Many Requests', 'Too Many Requests'))
export const notFoundRoute = () => new ApiError(404, simple(404, 'Not Found Error', 'Not Found'))
export const payloadTooLarge = () =>
  new ApiError(
    413,
    simple(
      413,
      'Payload Too Large',
      'Request body is too large.',
      `${PROBLEM_BASE}payload-too-large`,
    ),
  )
export const serviceUnavailable = () =>
  new ApiError(
    503,
    simple(503, 'Service Unavailable', 'Service Unavailable', `${PROBLEM_BASE}service-unavailable`),
  )
export const internalError = () =>
  new ApiError(
    500,
    simple(500, 'Internal Server Error', 'Internal Server Error', `${PROBLEM_BASE}internal-error`),
  )
