import { InvalidRequestError } from './errors.js'

/**
 * How deep a JSON body may nest (docs/api.md §1.2). Every body the API takes is two or three levels
 * deep; the bound keeps parsing, checking and quoting a value back cheap and non-recursive in depth.
 */
export const MAX_JSON_DEPTH = 16

const isJsonType = (type: unknown) =>
  typeof type === 'string' && /^application\/json\s*(;|$)/i.test(type)

function refused(message: string): InvalidRequestError {
  return new InvalidRequestError([{ parameters: { body: [] }, message }])
}

/**
 * The X 400 for a JSON body that nests past MAX_JSON_DEPTH or holds a NUL character (`\u0000`,
 * which Postgres refuses in text), else undefined. One pass over the text, before it is parsed,
 * so that no route can forget it; text that is not JSON is left to the parser's own message.
 */
export function jsonBodyError(contentType: unknown, text: string): InvalidRequestError | undefined {
  if (!isJsonType(contentType)) return undefined
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x22) inString = false
      else if (c === 0x5c) {
        // An escape: `\u0000` is NUL; any other escape is skipped whole.
        if (text.startsWith('u0000', i + 1)) {
          return refused('The request body holds a NUL character (\\u0000), which is not allowed.')
        }
        i++
      }
    } else if (c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      depth++
      if (depth > MAX_JSON_DEPTH) {
        return refused(`The request body nests deeper than ${MAX_JSON_DEPTH} levels.`)
      }
    } else if (c === 0x5d || c === 0x7d) depth--
  }
  return undefined
}
