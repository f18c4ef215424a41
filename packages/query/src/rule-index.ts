import { langTerm, type Includes, type WirePost, type WireUser } from '@threadline/domain'
import type { Ast } from './ast.js'
import { compileView, type ViewPredicate } from './matcher.js'
import { STOPWORDS } from './parse.js'
import { viewOf, type PostView } from './view.js'

/** Equality keys a Post can be looked up by; each mirrors one PostView field. */
type KeyKind =
  | 'conversation' // conversation_id
  | 'replyTo' // in_reply_to (first replied_to reference)
  | 'quotes' // a quoted reference
  | 'retweets' // a retweeted reference
  | 'author' // author_id
  | 'authorName' // lower-cased author username
  | 'replyUser' // in_reply_to_user_id
  | 'replyUserName' // lower-cased replied-to username
  | 'term' // one search term
type Key = readonly [KeyKind, string]

/** A rule's keys: a Post can match the rule only if it has one of them. Lower rank = rarer. */
interface Plan {
  keys: Key[]
  rank: number
}

const termRank = (t: string): number =>
  t.startsWith('lang:') || t.startsWith('is:') || t.startsWith('has:')
    ? 6
    : STOPWORDS.has(t) || t.length < 3
      ? 5
      : 3

/** The rarest-looking term of a phrase: the whole phrase implies every one of them. */
function bestTerm(terms: string[]): string {
  let best = terms[0]!
  for (const t of terms) {
    if (termRank(t) < termRank(best) || (termRank(t) === termRank(best) && t.length > best.length))
      best = t
  }
  return best
}

/**
 * Which keys must a matching Post carry? AND needs only its most selective child's keys, OR needs
 * the union of all its children's, and a negation (or an empty phrase) gives none: such rules go
 * to the fallback list and are tested against every Post.
 */
function plan(ast: Ast): Plan | undefined {
  switch (ast.type) {
    case 'id': {
      const kind: KeyKind = {
        conversation_id: 'conversation',
        in_reply_to: 'replyTo',
        quotes_of: 'quotes',
        retweets_of: 'retweets',
      }[ast.field] as KeyKind
      return { keys: [[kind, ast.id]], rank: 1 }
    }
    case 'user': {
      const keys: Key[] = []
      const from = ast.role === 'from'
      if (ast.id !== undefined) keys.push([from ? 'author' : 'replyUser', ast.id])
      if (ast.username !== undefined)
        keys.push([from ? 'authorName' : 'replyUserName', ast.username])
      return { keys, rank: 2 }
    }
    case 'text':
    case 'url': {
      if (ast.terms.length === 0) return undefined
      const t = bestTerm(ast.terms)
      return { keys: [['term', t]], rank: termRank(t) }
    }
    case 'entity':
      return { keys: [['term', ast.term]], rank: 3 }
    case 'is':
    case 'has':
      return { keys: [['term', `${ast.type}:${ast.value}`]], rank: 6 }
    case 'lang':
      return { keys: [['term', langTerm(ast.value)]], rank: 6 }
    case 'not':
      return undefined
    case 'and': {
      let best: Plan | undefined
      for (const c of ast.children) {
        const p = plan(c)
        if (!p) continue
        if (
          !best ||
          p.rank < best.rank ||
          (p.rank === best.rank && p.keys.length < best.keys.length)
        )
          best = p
      }
      return best
    }
    case 'or': {
      const keys: Key[] = []
      let rank = 0
      for (const c of ast.children) {
        const p = plan(c)
        if (!p) return undefined
        keys.push(...p.keys)
        rank = Math.max(rank, p.rank)
      }
      return { keys, rank }
    }
  }
}

/** Rules whose keys say it all: a key hit is a match, no predicate to run. */
function isExact(ast: Ast): boolean {
  switch (ast.type) {
    case 'id':
    case 'user':
    case 'entity':
    case 'is':
    case 'has':
    case 'lang':
      return true
    case 'text':
    case 'url':
      return ast.terms.length === 1
    default:
      return false
  }
}

/** Allocated only when a Post reaches a rule filed under several keys. */
interface Seen<T> {
  set: Set<Entry<T>> | undefined
}

interface Entry<T> {
  id: string
  payload: T
  test: ViewPredicate
  exact: boolean
  /** Filed under more than one key, so one Post may reach it twice. */
  multi: boolean
  keys: Key[] | undefined
}

/**
 * Finds every rule a Post matches without testing each rule: rules are filed under equality keys
 * (conversation, reply and quote targets, authors, search terms) and only the rules filed under
 * one of the Post's keys, plus the few that have no key (negations only), are tested. Adding and
 * removing a rule costs a few map operations.
 */
export class RuleIndex<T> {
  private readonly entries = new Map<string, Entry<T>>()
  private readonly byKey: Record<KeyKind, Map<string, Set<Entry<T>>>> = {
    conversation: new Map(),
    replyTo: new Map(),
    quotes: new Map(),
    retweets: new Map(),
    author: new Map(),
    authorName: new Map(),
    replyUser: new Map(),
    replyUserName: new Map(),
    term: new Map(),
  }
  private readonly fallback = new Set<Entry<T>>()

  add(id: string, ast: Ast, payload: T): void {
    this.remove(id)
    const p = plan(ast)
    const entry: Entry<T> = {
      id,
      payload,
      test: compileView(ast),
      exact: isExact(ast),
      multi: (p?.keys.length ?? 0) > 1,
      keys: p?.keys,
    }
    this.entries.set(id, entry)
    if (!p) {
      this.fallback.add(entry)
      return
    }
    for (const [kind, value] of p.keys) {
      const map = this.byKey[kind]
      let set = map.get(value)
      if (!set) map.set(value, (set = new Set()))
      set.add(entry)
    }
  }

  remove(id: string): void {
    const entry = this.entries.get(id)
    if (!entry) return
    this.entries.delete(id)
    this.fallback.delete(entry)
    for (const [kind, value] of entry.keys ?? []) {
      const map = this.byKey[kind]
      const set = map.get(value)
      if (!set) continue
      set.delete(entry)
      if (set.size === 0) map.delete(value)
    }
  }

  /** Payloads of every rule the Post matches (each once, in no particular order). */
  match(post: WirePost, includes?: Includes, author?: WireUser): T[] {
    return this.matchView(viewOf(post, includes, author))
  }

  matchView(view: PostView): T[] {
    const out: T[] = []
    // Only rules filed under several keys (OR) can be reached twice; the rest need no dedupe.
    const seen: Seen<T> = { set: undefined }
    const k = this.byKey
    const visit = RuleIndex.visit<T>
    if (view.conversationId !== undefined)
      visit(k.conversation.get(view.conversationId), view, seen, out)
    if (view.inReplyTo !== undefined) visit(k.replyTo.get(view.inReplyTo), view, seen, out)
    if (view.authorId !== undefined) visit(k.author.get(view.authorId), view, seen, out)
    if (view.authorUsername !== undefined)
      visit(k.authorName.get(view.authorUsername), view, seen, out)
    if (view.replyToUserId !== undefined)
      visit(k.replyUser.get(view.replyToUserId), view, seen, out)
    if (view.replyToUsername !== undefined)
      visit(k.replyUserName.get(view.replyToUsername), view, seen, out)
    for (const r of view.refs) {
      if (r.type === 'quoted') visit(k.quotes.get(r.id), view, seen, out)
      else if (r.type === 'retweeted') visit(k.retweets.get(r.id), view, seen, out)
    }
    if (k.term.size > 0) for (const t of view.terms) visit(k.term.get(t), view, seen, out)
    for (const e of this.fallback) if (e.test(view)) out.push(e.payload)
    return out
  }

  private static visit<T>(
    set: Set<Entry<T>> | undefined,
    view: PostView,
    seen: Seen<T>,
    out: T[],
  ): void {
    if (set === undefined) return
    for (const e of set) {
      if (e.multi) {
        seen.set ??= new Set()
        if (seen.set.has(e)) continue
        seen.set.add(e)
      }
      if (e.exact || e.test(view)) out.push(e.payload)
    }
  }

  get size(): number {
    return this.entries.size
  }
}
