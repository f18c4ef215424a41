/**
 * The one tokenizer of Threadline. The writer stores `searchTerms(post)` in `posts.search_terms`
 * and the query package matches against the same array (SQL) or recomputes it (in memory), so
 * search, counts and stream rules agree by construction. Postgres's text-search parser is not used:
 * it tokenises differently from any JavaScript, and the two sides would drift.
 *
 * Term kinds share one array (and one GIN index) by prefix; a plain word never contains `#`, `@`,
 * `$`, `/` or `:`, so kinds cannot collide:
 * - `coca`, `cola`          word tokens of `text`, in order, repeated (phrases check contiguity)
 * - `/example`, `/com`      tokens of each URL (entities.urls and URL-ish text), in order; URLs are
 *                           separated by a lone `/` so a URL phrase never spans two URLs
 * - `#tag`, `@user`, `$cash` from the text and from entities
 * - `is:reply|quote|retweet`, `has:media|links|mentions|hashtags`, `lang:xx` flags
 */

/** Scripts written without spaces: each character is a token, so a phrase finds any run of them. */
const PER_CHAR = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}]/u
const PER_CHAR_G = new RegExp(PER_CHAR.source, 'gu')
const WORD = /[\p{L}\p{N}\p{M}]+/gu
const TAG_CHARS = '[\\p{L}\\p{N}\\p{M}_]'
/** A sigil must not follow a word character (`a#b` is not a hashtag, `a@b.c` not a mention). */
const BEFORE = '(?<![\\p{L}\\p{N}\\p{M}_&/])'
const HASHTAG_IN_TEXT = new RegExp(`${BEFORE}[#＃](${TAG_CHARS}+)`, 'gu')
const MENTION_IN_TEXT = new RegExp(`${BEFORE}[@＠]([A-Za-z0-9_]+)`, 'gu')
const CASHTAG_IN_TEXT = new RegExp(`${BEFORE}\\$([A-Za-z][A-Za-z0-9_]*)`, 'gu')
const URL_IN_TEXT = /\bhttps?:\/\/[^\s<>"]+/giu

/** The syntax of query operands `#tag`, `@user`, `$cash` (whole word). */
export const HASHTAG_SYNTAX = new RegExp(`^[#＃](${TAG_CHARS}+)$`, 'u')
export const MENTION_SYNTAX = /^[@＠]([A-Za-z0-9_]+)$/u
export const CASHTAG_SYNTAX = /^\$([A-Za-z][A-Za-z0-9_]*)$/u

// eslint-disable-next-line no-control-regex -- ASCII includes the control characters
const ASCII = /^[\u0000-\u007f]*$/
const ASCII_WORD = /[a-z0-9]+/g
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

/** NFKC, with lone surrogates replaced (Postgres refuses them; they are never letters anyway). */
function normalise(s: string): string {
  // ASCII is its own NFKC form and has no surrogates: the common case skips both passes.
  if (ASCII.test(s)) return s
  return s.replace(LONE_SURROGATE, '\ufffd').normalize('NFKC')
}

/** Case folding close to Unicode's full folding (`ß` → `ss`), per token so context cannot matter. */
const fold = (token: string): string =>
  ASCII.test(token) ? token.toLowerCase() : token.toUpperCase().toLowerCase()

/**
 * Case-folded, Unicode-aware word tokens (NFKC): runs of letters, marks and digits; anything else
 * separates (`coca-cola` → coca, cola; `don't` → don, t). Han, kana and Thai-like scripts give one
 * token per character.
 */
export function tokenize(text: string): string[] {
  // ASCII fast path: letters and digits are the only word characters, and lower-casing the whole
  // text equals lower-casing each token.
  if (ASCII.test(text)) return text.toLowerCase().match(ASCII_WORD) ?? []
  const out: string[] = []
  for (const m of normalise(text).matchAll(WORD)) {
    const run = m[0]
    if (!ASCII.test(run) && PER_CHAR.test(run)) {
      // Split the run around per-character scripts, keeping other letters together.
      let last = 0
      for (const c of run.matchAll(PER_CHAR_G)) {
        if (c.index > last) out.push(fold(run.slice(last, c.index)))
        out.push(c[0])
        last = c.index + c[0].length
      }
      if (last < run.length) out.push(fold(run.slice(last)))
    } else {
      out.push(fold(run))
    }
  }
  return out
}

/** One prefixed term for a tag or name; empty when nothing usable is left. */
function entityTerm(sigil: '#' | '@' | '$', value: string): string {
  const v = fold(normalise(value)).replace(/\s+/gu, '')
  return v === '' ? '' : sigil + v
}

export const hashtagTerm = (tag: string): string => entityTerm('#', tag)
export const mentionTerm = (username: string): string => entityTerm('@', username)
export const cashtagTerm = (tag: string): string => entityTerm('$', tag)
/** The terms of a URL or of a `url:` operand. */
export const urlTerms = (url: string): string[] => tokenize(url).map((t) => `/${t}`)
export const langTerm = (lang: string): string => `lang:${lang.toLowerCase().replace(/\s+/gu, '')}`

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : [])
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined)

const isAsciiAlpha = (c: number): boolean => (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
const isAsciiTagChar = (c: number): boolean =>
  isAsciiAlpha(c) || (c >= 48 && c <= 57) || c === 95 /* _ */
/** What may not precede a sigil: the ASCII part of the regexes' lookbehind. */
const blocksSigil = (c: number): boolean =>
  isAsciiTagChar(c) || c === 38 /* & */ || c === 47 /* / */

/**
 * The ASCII-text equivalent of HASHTAG_IN_TEXT / MENTION_IN_TEXT / CASHTAG_IN_TEXT (a hand scan:
 * hashtag-heavy Posts made the regexes the rule index's main cost). Tested equal to them.
 */
function scanAsciiSigil(
  text: string,
  sigil: '#' | '@' | '$',
  tags: Set<string>,
  flag: string,
): void {
  const n = text.length
  let i = text.indexOf(sigil)
  while (i >= 0) {
    let j = i + 1
    if (i === 0 || !blocksSigil(text.charCodeAt(i - 1))) {
      if (sigil !== '$' || (j < n && isAsciiAlpha(text.charCodeAt(j)))) {
        while (j < n && isAsciiTagChar(text.charCodeAt(j))) j += 1
        if (j > i + 1) addTag(tags, sigil + text.slice(i + 1, j).toLowerCase(), flag)
      }
    }
    i = text.indexOf(sigil, j)
  }
}

function addTag(tags: Set<string>, term: string, flag: string): void {
  if (term === '') return
  tags.add(term)
  tags.add(flag)
}

/** The searchable terms of a Post object of X's shape (see the file comment for the layout). */
export function searchTerms(post: { text?: unknown; [field: string]: unknown }): string[] {
  const text = typeof post.text === 'string' ? post.text : ''
  const entities = isObj(post.entities) ? post.entities : {}
  const terms = tokenize(text)
  const tags = new Set<string>()

  const urls: string[] = []
  for (const u of list(entities.urls)) {
    if (!isObj(u)) continue
    for (const key of ['expanded_url', 'url']) {
      const value = str(u[key])
      if (value) urls.push(value)
    }
  }
  if (text.includes('://')) for (const m of text.matchAll(URL_IN_TEXT)) urls.push(m[0])
  let links = false
  for (const url of urls) {
    const parts = urlTerms(url)
    if (parts.length === 0) continue
    terms.push('/', ...parts)
    links = true
  }

  if (ASCII.test(text)) {
    scanAsciiSigil(text, '#', tags, 'has:hashtags')
    scanAsciiSigil(text, '@', tags, 'has:mentions')
    scanAsciiSigil(text, '$', tags, 'has:cashtags')
  } else {
    for (const m of text.matchAll(HASHTAG_IN_TEXT)) addTag(tags, hashtagTerm(m[1]!), 'has:hashtags')
    for (const m of text.matchAll(MENTION_IN_TEXT)) addTag(tags, mentionTerm(m[1]!), 'has:mentions')
    for (const m of text.matchAll(CASHTAG_IN_TEXT)) addTag(tags, cashtagTerm(m[1]!), 'has:cashtags')
  }
  for (const h of list(entities.hashtags)) {
    if (isObj(h) && str(h.tag)) addTag(tags, hashtagTerm(h.tag as string), 'has:hashtags')
  }
  for (const m of list(entities.mentions)) {
    if (isObj(m) && str(m.username)) addTag(tags, mentionTerm(m.username as string), 'has:mentions')
  }
  for (const c of list(entities.cashtags)) {
    if (isObj(c) && str(c.tag)) addTag(tags, cashtagTerm(c.tag as string), 'has:cashtags')
  }

  if (links) tags.add('has:links')
  const attachments = isObj(post.attachments) ? post.attachments : {}
  if (list(attachments.media_keys).length > 0) tags.add('has:media')
  for (const ref of list(post.referenced_tweets)) {
    if (!isObj(ref)) continue
    if (ref.type === 'replied_to') tags.add('is:reply')
    else if (ref.type === 'quoted') tags.add('is:quote')
    else if (ref.type === 'retweeted') tags.add('is:retweet')
  }
  if (typeof post.lang === 'string' && post.lang !== '') tags.add(langTerm(normalise(post.lang)))
  for (const t of tags) terms.push(t)
  return terms
}
