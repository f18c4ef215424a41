import { generateId, isId, type Includes, type WirePost } from '@threadline/domain'
import { compileMatcher, conversationIdOf, parseQuery } from '@threadline/query'

/** A rule value made ready for matching. */
export interface CompiledRule {
  /** When the rule matches exactly these conversations, matching is a hash lookup. */
  conversationIds?: string[]
  /** For every other rule: tested against each new Post. */
  test?: (post: WirePost) => boolean
}

export type RuleCompiler = (
  value: string,
) => { ok: true; rule: CompiledRule } | { ok: false; reason: string }

const CONVERSATION_TERM = /^\(?conversation_id:(\d{1,19})\)?$/

/**
 * The X query language through the query package: a bare `conversation_id:X` rule becomes a hash
 * lookup, anything else a compiled predicate. `includesOf` supplies the users that `from:`/`to:` by
 * username need.
 */
export function queryCompiler(includesOf: (post: WirePost) => Includes): RuleCompiler {
  return (value) => {
    const parsed = parseQuery(value)
    if (!parsed.ok) return { ok: false, reason: parsed.errors.join(', ') }
    const conversation = conversationIdOf(parsed.ast)
    if (conversation !== undefined) return { ok: true, rule: { conversationIds: [conversation] } }
    const matcher = compileMatcher(parsed.ast)
    return { ok: true, rule: { test: (post) => matcher(post, includesOf(post)) } }
  }
}

/**
 * A minimal compiler kept from before the query package worked: `conversation_id:ID` rules and ORs
 * of them only. The simulator uses queryCompiler by default.
 */
export const compileConversationRule: RuleCompiler = (value) => {
  const terms = value.trim().split(/\s+OR\s+/)
  const ids: string[] = []
  let position = 1
  for (const term of terms) {
    const m = CONVERSATION_TERM.exec(term)
    if (!m || !isId(m[1])) {
      const op = /^-?\(?([a-z_]+):/.exec(term)?.[1]
      return {
        ok: false,
        reason: op
          ? `Reference to invalid operator '${op}' (at position ${position})`
          : `The simulator only matches conversation_id rules (at position ${position})`,
      }
    }
    ids.push(m[1])
    position += term.length + 4
  }
  return { ok: true, rule: { conversationIds: ids } }
}

export interface Rule {
  id: string
  value: string
  tag?: string
  compiled: CompiledRule
}

export interface AddResult {
  created: Rule[]
  errors: Record<string, unknown>[]
  invalid: number
}

/** The upstream's rule set: one app, one bearer token, so one set. */
export class RuleStore {
  private readonly byId = new Map<string, Rule>()
  private readonly byValue = new Map<string, Rule>()
  private readonly byConversation = new Map<string, Rule[]>()
  private readonly scanned = new Set<Rule>()

  constructor(private readonly compile: RuleCompiler = compileConversationRule) {}

  get size(): number {
    return this.byId.size
  }

  list(): Rule[] {
    return [...this.byId.values()]
  }

  get(id: string): Rule | undefined {
    return this.byId.get(id)
  }

  add(items: { value: string; tag?: string }[], dryRun: boolean): AddResult {
    const created: Rule[] = []
    const errors: Record<string, unknown>[] = []
    let invalid = 0
    const seen = new Set<string>()
    for (const item of items) {
      const existing = this.byValue.get(item.value)
      if (existing || seen.has(item.value)) {
        invalid++
        errors.push({
          value: item.value,
          ...(existing ? { id: existing.id } : {}),
          title: 'DuplicateRule',
          type: 'https://api.twitter.com/2/problems/duplicate-rules',
        })
        continue
      }
      const compiled = this.compile(item.value)
      if (!compiled.ok) {
        invalid++
        errors.push({
          value: item.value,
          details: [compiled.reason],
          title: 'UnprocessableEntity',
          type: 'https://api.twitter.com/2/problems/invalid-rules',
        })
        continue
      }
      seen.add(item.value)
      const rule: Rule = {
        id: generateId(),
        value: item.value,
        ...(item.tag !== undefined ? { tag: item.tag } : {}),
        compiled: compiled.rule,
      }
      created.push(rule)
    }
    if (!dryRun) for (const rule of created) this.insert(rule)
    return { created, errors, invalid }
  }

  private insert(rule: Rule) {
    this.byId.set(rule.id, rule)
    this.byValue.set(rule.value, rule)
    if (rule.compiled.conversationIds) {
      for (const id of rule.compiled.conversationIds) {
        const list = this.byConversation.get(id)
        if (list) list.push(rule)
        else this.byConversation.set(id, [rule])
      }
    } else this.scanned.add(rule)
  }

  /** Removes rules; returns those removed and the keys not found. */
  delete(
    keys: string[],
    by: 'ids' | 'values',
    dryRun: boolean,
  ): { deleted: Rule[]; missing: string[] } {
    const deleted: Rule[] = []
    const missing: string[] = []
    for (const key of keys) {
      const rule = by === 'ids' ? this.byId.get(key) : this.byValue.get(key)
      if (!rule || deleted.includes(rule)) {
        missing.push(key)
        continue
      }
      deleted.push(rule)
    }
    if (!dryRun) for (const rule of deleted) this.remove(rule)
    return { deleted, missing }
  }

  private remove(rule: Rule) {
    this.byId.delete(rule.id)
    this.byValue.delete(rule.value)
    this.scanned.delete(rule)
    for (const id of rule.compiled.conversationIds ?? []) {
      const list = this.byConversation.get(id)?.filter((r) => r !== rule)
      if (list && list.length > 0) this.byConversation.set(id, list)
      else this.byConversation.delete(id)
    }
  }

  /** Rules that a Post matches: a hash lookup for conversation rules, a test for the rest. */
  match(post: WirePost): Rule[] {
    const conv =
      post.conversation_id === undefined ? undefined : this.byConversation.get(post.conversation_id)
    if (this.scanned.size === 0) return conv ?? NONE
    const out = conv ? [...conv] : []
    for (const rule of this.scanned) if (rule.compiled.test!(post)) out.push(rule)
    return out
  }
}

const NONE: Rule[] = []
