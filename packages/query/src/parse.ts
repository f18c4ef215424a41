import {
  CASHTAG_SYNTAX,
  HASHTAG_SYNTAX,
  MENTION_SYNTAX,
  cashtagTerm,
  hashtagTerm,
  isId,
  mentionTerm,
  tokenize,
  urlTerms,
} from '@threadline/domain'
import type { Ast, HasValue, IdField, IsValue } from './ast.js'

export type ParseResult = { ok: true; ast: Ast } | { ok: false; errors: string[] }
export interface ParseOptions {
  /** Longest accepted query, in characters (default 1024, never above 4096). */
  maxLength?: number
}

export const DEFAULT_MAX_LENGTH = 1024
export const HARD_MAX_LENGTH = 4096
/** Deeper nesting is refused so that no compiled query can exhaust a stack (ours or Postgres's). */
const MAX_DEPTH = 64
/** After this many errors the rest of the query is not worth reporting. */
const MAX_ERRORS = 10

/** Words X ignores as the only positive clause of a query. */
export const STOPWORDS: ReadonlySet<string> = new Set(
  (
    'a an and are as at be but by for from has have he her his i if in into is it its me my no ' +
    'not of on or our she so such that the their them then there these they this to was we were ' +
    'will with you your'
  ).split(' '),
)

const ID_OPERATORS: Record<string, IdField> = {
  conversation_id: 'conversation_id',
  in_reply_to_tweet_id: 'in_reply_to',
  in_reply_to_status_id: 'in_reply_to',
  quotes_of_tweet_id: 'quotes_of',
  quotes_of_status_id: 'quotes_of',
  retweets_of_tweet_id: 'retweets_of',
  retweets_of_status_id: 'retweets_of',
}
const IS_VALUES: readonly IsValue[] = ['reply', 'quote', 'retweet']
const HAS_VALUES: readonly HasValue[] = ['media', 'links', 'mentions', 'hashtags', 'cashtags']
const OPERATORS = new Set([...Object.keys(ID_OPERATORS), 'from', 'to', 'url', 'is', 'has', 'lang'])
const USERNAME = /^[A-Za-z0-9_]{1,50}$/
const LANG = /^[A-Za-z]{2,3}(?:-[A-Za-z0-9]{1,8})*$/
/** Control characters separate terms like spaces do (and never reach SQL parameters). */
const isSpace = (c: string): boolean => c <= '\u001f' || c === '\u007f' || /\s/u.test(c)

type TokenKind = 'word' | 'quoted' | 'op' | 'lparen' | 'rparen' | 'neg' | 'or' | 'and' | 'eof'
interface Token {
  kind: TokenKind
  /** The source text, as reported in messages. */
  text: string
  /** 1-based position of the first character. */
  pos: number
  /** The inside of a quoted string, or an operator's quoted value. */
  value?: string
  name?: string
}

class QueryErrors {
  readonly list: string[] = []
  /** Each message once: `(((a` lacks three `)` at the same place, which one message says. */
  add(reason: string, pos: number): void {
    const message = `${reason} (at position ${pos})`
    if (this.list.length < MAX_ERRORS && !this.list.includes(message)) this.list.push(message)
  }
}

function lex(input: string, errors: QueryErrors): Token[] {
  const tokens: Token[] = []
  let i = 0
  const n = input.length
  // Reads a double-quoted string starting at `start` (the opening quote); undefined if unclosed.
  const quoted = (start: number): { value: string; end: number } | undefined => {
    const close = input.indexOf('"', start + 1)
    return close < 0 ? undefined : { value: input.slice(start + 1, close), end: close + 1 }
  }
  while (i < n) {
    const c = input[i]!
    if (isSpace(c)) {
      i += 1
      continue
    }
    const pos = i + 1
    if (c === '(' || c === ')') {
      tokens.push({ kind: c === '(' ? 'lparen' : 'rparen', text: c, pos })
      i += 1
      continue
    }
    if (c === '"') {
      const q = quoted(i)
      if (!q) {
        errors.add(`no viable alternative at input '${input.slice(i)}'`, pos)
        i = n
        continue
      }
      tokens.push({ kind: 'quoted', text: input.slice(i, q.end), pos, value: q.value })
      i = q.end
      continue
    }
    if (c === '-') {
      const next = input[i + 1]
      if (next === undefined || isSpace(next) || next === ')' || next === '-') {
        errors.add(`no viable alternative at input '-'`, pos)
        i += 1
        continue
      }
      tokens.push({ kind: 'neg', text: '-', pos })
      i += 1
      continue
    }
    let j = i
    while (j < n && !isSpace(input[j]!) && input[j] !== '(' && input[j] !== ')' && input[j] !== '"')
      j += 1
    const word = input.slice(i, j)
    const op = /^([A-Za-z_]+):$/.exec(word)
    if (op && input[j] === '"') {
      const q = quoted(j)
      if (!q) {
        errors.add(`no viable alternative at input '${input.slice(i)}'`, pos)
        i = n
        continue
      }
      tokens.push({ kind: 'op', text: input.slice(i, q.end), pos, name: op[1]!, value: q.value })
      i = q.end
      continue
    }
    const kind: TokenKind = word === 'OR' ? 'or' : word === 'AND' ? 'and' : 'word'
    tokens.push({ kind, text: word, pos })
    i = j
  }
  tokens.push({ kind: 'eof', text: '<EOF>', pos: n + 1 })
  return tokens
}

const and = (children: Ast[]): Ast => {
  const flat = children.flatMap((c) => (c.type === 'and' ? c.children : [c]))
  return flat.length === 1 ? flat[0]! : { type: 'and', children: flat }
}
const or = (children: Ast[]): Ast => {
  const flat = children.flatMap((c) => (c.type === 'or' ? c.children : [c]))
  return flat.length === 1 ? flat[0]! : { type: 'or', children: flat }
}

class Parser {
  private at = 0
  private depth = 0
  /** Where each node started, for the messages of the checks made after parsing. */
  readonly positions = new WeakMap<Ast, number>()

  constructor(
    private readonly tokens: Token[],
    private readonly errors: QueryErrors,
  ) {}

  private peek(): Token {
    return this.tokens[this.at]!
  }
  private next(): Token {
    const t = this.tokens[this.at]!
    if (t.kind !== 'eof') this.at += 1
    return t
  }

  parseQuery(): Ast | null {
    let ast = this.parseOr()
    while (this.peek().kind !== 'eof') {
      const t = this.next()
      if (t.kind === 'rparen') this.errors.add(`missing EOF at ')'`, t.pos)
      else this.errors.add(`extraneous input '${t.text}' expecting <EOF>`, t.pos)
      const more = this.parseOr()
      if (ast && more) ast = and([ast, more])
    }
    return ast
  }

  private parseOr(): Ast | null {
    const first = this.parseAnd()
    const children = first ? [first] : []
    let ok = first !== null
    while (this.peek().kind === 'or') {
      this.next()
      const child = this.parseAnd()
      if (child) children.push(child)
      else ok = false
    }
    return ok ? or(children) : null
  }

  private parseAnd(): Ast | null {
    const children: Ast[] = []
    let ok = true
    for (;;) {
      const t = this.peek()
      if (t.kind === 'eof' || t.kind === 'rparen' || t.kind === 'or') break
      if (t.kind === 'and') {
        this.next()
        this.errors.add(
          'Ambiguous use of and as a keyword. Use a space to logically join two clauses, or "and" to find occurrences of and in text',
          t.pos,
        )
        ok = false
        continue
      }
      const child = this.parseUnary()
      if (child) children.push(child)
      else ok = false
    }
    if (children.length === 0) {
      // After a lexical error (an unclosed quote ate the rest) the missing term is no news.
      if (ok && !(this.peek().kind === 'eof' && this.errors.list.length > 0)) {
        const t = this.peek()
        this.errors.add(`no viable alternative at input '${t.text}'`, t.pos)
      }
      return null
    }
    return ok ? and(children) : null
  }

  private parseUnary(): Ast | null {
    const t = this.peek()
    if (t.kind !== 'neg') return this.parsePrimary()
    this.next()
    const inner = this.parsePrimary()
    if (!inner) return null
    const node: Ast = { type: 'not', child: inner }
    this.positions.set(node, t.pos)
    return node
  }

  private parsePrimary(): Ast | null {
    const t = this.next()
    switch (t.kind) {
      case 'lparen': {
        if (this.depth >= MAX_DEPTH) {
          this.errors.add(`Too many nested parentheses (more than ${MAX_DEPTH})`, t.pos)
          this.at = this.tokens.length - 1
          return null
        }
        this.depth += 1
        const inner = this.parseOr()
        this.depth -= 1
        const close = this.peek()
        if (close.kind === 'rparen') this.next()
        else this.errors.add(`missing ')' at '${close.text}'`, close.pos)
        return inner
      }
      case 'quoted':
        return this.place(textNode(t.value!, true), t.pos)
      case 'word':
        return this.place(this.word(t), t.pos)
      case 'op':
        return this.place(this.operator(t.name!, t.value!, t), t.pos)
      default:
        this.errors.add(`no viable alternative at input '${t.text}'`, t.pos)
        return null
    }
  }

  private place(node: Ast | null, pos: number): Ast | null {
    if (node) this.positions.set(node, pos)
    return node
  }

  private word(t: Token): Ast | null {
    const text = t.text
    const op = /^([A-Za-z_]+):(.*)$/su.exec(text)
    if (op) {
      const [, name, value] = op as unknown as [string, string, string]
      const lower = name.toLowerCase()
      // An unquoted URL is a phrase of its tokens, as the text would be.
      if (lower === 'http' || lower === 'https') return textNode(text, false)
      if (value !== '' || OPERATORS.has(name)) {
        if (value === '') {
          this.errors.add(`no viable alternative at input '${text}'`, t.pos)
          return null
        }
        return this.operator(name, value, t)
      }
    }
    let m = HASHTAG_SYNTAX.exec(text)
    if (m) return { type: 'entity', kind: 'hashtag', term: hashtagTerm(m[1]!) }
    m = MENTION_SYNTAX.exec(text)
    if (m) return { type: 'entity', kind: 'mention', term: mentionTerm(m[1]!) }
    m = CASHTAG_SYNTAX.exec(text)
    if (m) return { type: 'entity', kind: 'cashtag', term: cashtagTerm(m[1]!) }
    return textNode(text, false)
  }

  private operator(name: string, value: string, t: Token): Ast | null {
    const invalid = (what: string): null => {
      this.errors.add(what, t.pos)
      return null
    }
    const field = ID_OPERATORS[name]
    if (field) {
      if (!isId(value)) return invalid(`Invalid value for ${name}: '${value}' is not an id`)
      return { type: 'id', field, id: BigInt(value).toString() }
    }
    switch (name) {
      case 'from':
      case 'to': {
        const v = value.startsWith('@') ? value.slice(1) : value
        if (!USERNAME.test(v)) return invalid(`Invalid value for ${name}: '${value}'`)
        // Digits may be an id or a username made of digits: the rule matches either.
        const id = isId(v) ? BigInt(v).toString() : undefined
        return { type: 'user', role: name, username: v.toLowerCase(), ...(id ? { id } : {}) }
      }
      case 'url':
        return { type: 'url', terms: urlTerms(value) }
      case 'is':
        if (!IS_VALUES.includes(value as IsValue))
          return invalid(`Reference to invalid operator 'is:${value}'`)
        return { type: 'is', value: value as IsValue }
      case 'has':
        if (!HAS_VALUES.includes(value as HasValue))
          return invalid(`Reference to invalid operator 'has:${value}'`)
        return { type: 'has', value: value as HasValue }
      case 'lang':
        if (!LANG.test(value)) return invalid(`Invalid value for lang: '${value}'`)
        return { type: 'lang', value: value.toLowerCase() }
      default:
        return invalid(`Reference to invalid operator '${name}'`)
    }
  }
}

function textNode(raw: string, phrase: boolean): Ast {
  const terms = tokenize(raw)
  return { type: 'text', terms, phrase: phrase || terms.length > 1, raw }
}

/** A clause that can carry a query on its own (not negated, not is/has/lang, not a stopword). */
function anchored(ast: Ast, allowStopwords: boolean, allowFlags: boolean): boolean {
  switch (ast.type) {
    case 'and':
      return ast.children.some((c) => anchored(c, allowStopwords, allowFlags))
    case 'or':
      return ast.children.every((c) => anchored(c, allowStopwords, allowFlags))
    case 'not':
      return false
    case 'text':
      return allowStopwords || ast.terms.some((t) => !STOPWORDS.has(t))
    case 'url':
      return allowStopwords || ast.terms.length > 0
    case 'is':
    case 'has':
    case 'lang':
      return allowFlags
    default:
      return true
  }
}

function firstFlag(ast: Ast): Ast | undefined {
  if (ast.type === 'is' || ast.type === 'has' || ast.type === 'lang') return ast
  if (ast.type === 'and' || ast.type === 'or') {
    for (const c of ast.children) {
      const f = firstFlag(c)
      if (f) return f
    }
  }
  if (ast.type === 'not') return firstFlag(ast.child)
  return undefined
}

/**
 * Parses a query of X's language (docs/api.md §2.5). Total: any string gives an AST or a list of
 * reasons, each `<reason> (at position N)` with N 1-based, never an exception.
 */
export function parseQuery(input: string, opts: ParseOptions = {}): ParseResult {
  try {
    return parse(input, opts)
  } catch (err) {
    // @NOTE unreachable by design (the fuzz test checks); a bug must still give a 400, not a 500.
    return {
      ok: false,
      errors: [`Unable to parse query: ${(err as Error).message} (at position 1)`],
    }
  }
}

function parse(input: string, opts: ParseOptions): ParseResult {
  const requested = opts.maxLength ?? DEFAULT_MAX_LENGTH
  const max = Math.max(1, Math.min(Number.isFinite(requested) ? requested : 0, HARD_MAX_LENGTH))
  if (typeof input !== 'string') input = String(input)
  if (input.length > max) {
    return {
      ok: false,
      errors: [
        `Query length ${input.length} exceeds the maximum of ${max} characters (at position ${max + 1})`,
      ],
    }
  }
  const errors = new QueryErrors()
  const parser = new Parser(lex(input, errors), errors)
  const ast = parser.parseQuery()
  if (errors.list.length > 0 || !ast) {
    if (errors.list.length === 0)
      errors.add(`no viable alternative at input '<EOF>'`, input.length + 1)
    return { ok: false, errors: errors.list }
  }
  const at = (node: Ast | undefined): number => (node && parser.positions.get(node)) ?? 1
  if (!anchored(ast, true, true)) {
    return {
      ok: false,
      errors: [`Rules must contain a non-negation term (at position ${at(ast)})`],
    }
  }
  if (!anchored(ast, true, false)) {
    return {
      ok: false,
      errors: [
        `is/has/lang cannot be used as a standalone operator (at position ${at(firstFlag(ast))})`,
      ],
    }
  }
  if (!anchored(ast, false, false)) {
    return {
      ok: false,
      errors: [
        `Rules must contain at least one positive, non-stopword clause (at position ${at(ast)})`,
      ],
    }
  }
  return { ok: true, ast }
}
