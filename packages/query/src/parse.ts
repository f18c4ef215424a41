import type { Ast } from './ast.js'

export type ParseResult = { ok: true; ast: Ast } | { ok: false; errors: string[] }
export interface ParseOptions {
  maxLength?: number
}

export function parseQuery(input: string, _opts: ParseOptions = {}): ParseResult {
  return {
    ok: true,
    ast: { type: 'text', terms: [input.toLowerCase()], phrase: false, raw: input },
  }
}
