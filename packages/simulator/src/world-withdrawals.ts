import { Prng } from './prng.js'
import type { SimPost, World } from './world.js'

/** A Post action of X's compliance stream. */
export type TweetWithdrawal = 'delete' | 'withheld' | 'drop' | 'undrop' | 'tweet_edit'
/** A user action of X's compliance stream. */
export type UserWithdrawal =
  | 'user_delete'
  | 'user_undelete'
  | 'user_protect'
  | 'user_unprotect'
  | 'user_suspend'
  | 'user_unsuspend'
  | 'user_withheld'
  | 'scrub_geo'

/** One event the world's compliance streams and batch jobs report (ComplianceEvent's fields). */
export interface WithdrawalEvent {
  kind: 'tweet' | 'user'
  id: string
  authorId?: string
  action: TweetWithdrawal | UserWithdrawal
  eventAt: string
  withheldInCountries?: string[]
  upToTweetId?: string
  /** tweet_edit: the world edits a Post in place, so both name the Post itself. */
  initialTweetId?: string
  editTweetIds?: string[]
}

/** A batch job's result line for one id (X: `id`, `action`, `created_at`, `redacted_at`, `reason`). */
export interface JobResult {
  id: string
  action: 'delete'
  createdAt: string
  redactedAt: string
  reason: 'deleted' | 'protected' | 'suspended' | 'deactivated' | 'dropped'
}

export interface Withdrawals {
  /** Events kept, in event_at order (the newest EVENT_LIMIT). */
  readonly size: number
  /** Events of `kind` whose event_at is in [fromMs, toMs), oldest first. */
  between(kind: 'tweet' | 'user', fromMs: number, toMs?: number): WithdrawalEvent[]
  /** Calls `fn` with every event from now on; returns the unsubscriber. */
  onEvent(fn: (e: WithdrawalEvent) => void): () => void
  /** One random event of the world's mix, now (the timer calls this). */
  step(atMs?: number): WithdrawalEvent | undefined
  /** Withdraws on demand (tests, benchmarks): the event is applied to the world and streamed. */
  apply(event: Omit<WithdrawalEvent, 'eventAt'> & { eventAt?: string }): WithdrawalEvent
  /** Deletes a Post now. */
  deletePost(id: string, atMs?: number): WithdrawalEvent
  /** Why a Post is not served, if it is not: its own delete or drop, or its author's state. */
  postState(id: string, authorId?: string): JobResult['reason'] | undefined
  /** Why a user is not served, if they are not. */
  userState(id: string): JobResult['reason'] | undefined
  /** The withheld countries of a Post (its own or its author's), if any. */
  withheld(id: string, authorId?: string): string[] | undefined
  /** Batch job results: a line for each id that is deleted, protected, suspended or deactivated. */
  jobResults(kind: 'tweets' | 'users', ids: Iterable<string>): JobResult[]
}

/** Events kept for replays (`backfill_minutes`, start_time): bounds a long-running simulator. */
const EVENT_LIMIT = 200_000
const COUNTRIES = ['DE', 'FR', 'IN', 'TR', 'BR', 'RU']

interface UserState {
  protectedAt?: number
  suspendedAt?: number
  deletedAt?: number
  withheld?: string[]
}

/**
 * The world's withdrawals (docs/architecture.md, "Compliance"): Posts deleted, dropped, withheld and
 * edited, users protected, suspended, deleted, withheld and geo-scrubbed, and their reversals, drawn
 * from their own seeded generator so the world's Posts stay what they were. Posts of the demo
 * conversations are picked often, so a demo shows a deletion in its tree.
 */
export function createWithdrawals(world: World, seed: number): Withdrawals {
  const prng = new Prng(seed ^ 0x5eed)
  const events: WithdrawalEvent[] = []
  const listeners = new Set<(e: WithdrawalEvent) => void>()
  const posts = new Map<string, { deletedAt?: number; droppedAt?: number; withheld?: string[] }>()
  const users = new Map<string, UserState>()
  const at = (ms: number) => new Date(ms).toISOString()

  const userOf = (id: string) => {
    let s = users.get(id)
    if (!s) users.set(id, (s = {}))
    return s
  }
  const postOf = (id: string) => {
    let s = posts.get(id)
    if (!s) posts.set(id, (s = {}))
    return s
  }

  function record(e: WithdrawalEvent): WithdrawalEvent {
    const ms = Date.parse(e.eventAt)
    if (e.kind === 'tweet') {
      const s = postOf(e.id)
      if (e.action === 'delete') s.deletedAt ??= ms
      else if (e.action === 'drop') s.droppedAt = ms
      else if (e.action === 'undrop') s.droppedAt = undefined
      else if (e.action === 'withheld') s.withheld = e.withheldInCountries
      else if (e.action === 'tweet_edit') edit(e.id)
    } else {
      const s = userOf(e.id)
      if (e.action === 'user_protect') s.protectedAt = ms
      else if (e.action === 'user_unprotect') s.protectedAt = undefined
      else if (e.action === 'user_suspend') s.suspendedAt = ms
      else if (e.action === 'user_unsuspend') s.suspendedAt = undefined
      else if (e.action === 'user_delete') s.deletedAt = ms
      else if (e.action === 'user_undelete') s.deletedAt = undefined
      else if (e.action === 'user_withheld') s.withheld = e.withheldInCountries
    }
    // Kept in event_at order (an event may be dated back): replays bisect on it.
    let at = events.length
    while (at > 0 && events[at - 1]!.eventAt > e.eventAt) at--
    events.splice(at, 0, e)
    if (events.length > EVENT_LIMIT) events.splice(0, events.length - EVENT_LIMIT)
    for (const fn of listeners) fn(e)
    return e
  }

  // An edit changes the text of the Post served by lookup (a re-fetch finds the new text).
  function edit(id: string) {
    const post = world.get(id)
    if (!post) return
    post.wire.text = `${post.wire.text.slice(0, 270)} (edited)`
    post.json = undefined
  }

  /** A Post to withdraw: often one of a demo conversation's replies, else a recent one. */
  function pickPost(): SimPost | undefined {
    const demos = world.demoConversations()
    if (demos.length > 0 && prng.chance(0.5)) {
      const conv = world.conversation(prng.pick(demos)) ?? []
      const replies = conv.filter((p) => p.kind === 'reply' && !posts.get(p.id)?.deletedAt)
      if (replies.length > 0) return prng.pick(replies)
    }
    const recent = world.since(world.startMs - 86_400_000)
    for (let tries = 0; tries < 5 && recent.length > 0; tries++) {
      const p = recent[Math.floor(prng.next() * recent.length)]!
      if (!posts.get(p.id)?.deletedAt) return p
    }
    return undefined
  }

  const pickUser = () => world.users[prng.int(0, world.users.length - 1)]

  /** One event of the mix: mostly deletes, then hides and their reversals, withholdings, edits. */
  function step(atMs = Date.now()): WithdrawalEvent | undefined {
    const r = prng.next()
    const eventAt = at(atMs)
    if (r < 0.55 || r >= 0.97) {
      const post = pickPost()
      if (!post) return undefined
      const base = { kind: 'tweet' as const, id: post.id, authorId: post.authorId, eventAt }
      if (r < 0.55) return record({ ...base, action: 'delete' })
      const action = posts.get(post.id)?.droppedAt !== undefined ? 'undrop' : 'drop'
      return record({ ...base, action })
    }
    if (r < 0.62) {
      const post = pickPost()
      if (!post) return undefined
      return record({
        kind: 'tweet',
        id: post.id,
        authorId: post.authorId,
        action: r < 0.6 ? 'withheld' : 'tweet_edit',
        eventAt,
        ...(r < 0.6
          ? { withheldInCountries: [prng.pick(COUNTRIES)] }
          : { initialTweetId: post.id, editTweetIds: [post.id] }),
      })
    }
    const user = pickUser()
    if (!user) return undefined
    const s = users.get(user.id) ?? {}
    const base = { kind: 'user' as const, id: user.id, eventAt }
    if (r < 0.74)
      return record({
        ...base,
        action: s.protectedAt !== undefined ? 'user_unprotect' : 'user_protect',
      })
    if (r < 0.84)
      return record({
        ...base,
        action: s.suspendedAt !== undefined ? 'user_unsuspend' : 'user_suspend',
      })
    if (r < 0.9)
      return record({
        ...base,
        action: s.deletedAt !== undefined ? 'user_undelete' : 'user_delete',
      })
    if (r < 0.94)
      return record({
        ...base,
        action: 'user_withheld',
        withheldInCountries: [prng.pick(COUNTRIES)],
      })
    const newest = world.newestFirst()[Symbol.iterator]().next()
    const upTo = newest.done ? undefined : newest.value.id
    return record({ ...base, action: 'scrub_geo', ...(upTo ? { upToTweetId: upTo } : {}) })
  }

  function userReason(s: UserState | undefined): JobResult['reason'] | undefined {
    if (!s) return undefined
    if (s.deletedAt !== undefined) return 'deactivated'
    if (s.suspendedAt !== undefined) return 'suspended'
    if (s.protectedAt !== undefined) return 'protected'
    return undefined
  }

  function postState(id: string, authorId?: string): JobResult['reason'] | undefined {
    const s = posts.get(id)
    if (s?.deletedAt !== undefined) return 'deleted'
    const author = authorId ?? world.get(id)?.authorId
    const reason = author === undefined ? undefined : userReason(users.get(author))
    if (reason) return reason
    if (s?.droppedAt !== undefined) return 'dropped'
    return undefined
  }

  /** When the state that `reason` names began. */
  function since(kind: 'tweets' | 'users', id: string, reason: JobResult['reason']): number {
    if (kind === 'tweets' && (reason === 'deleted' || reason === 'dropped')) {
      const s = posts.get(id)
      return (reason === 'deleted' ? s?.deletedAt : s?.droppedAt) ?? 0
    }
    const author = kind === 'users' ? id : world.get(id)?.authorId
    const s = author === undefined ? undefined : users.get(author)
    if (!s) return 0
    return (
      (reason === 'deactivated'
        ? s.deletedAt
        : reason === 'suspended'
          ? s.suspendedAt
          : s.protectedAt) ?? 0
    )
  }

  return {
    get size() {
      return events.length
    },
    between(kind, fromMs, toMs = Infinity) {
      // Events are in time order: find the start by bisection, then walk.
      let lo = 0
      let hi = events.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (Date.parse(events[mid]!.eventAt) < fromMs) lo = mid + 1
        else hi = mid
      }
      const out: WithdrawalEvent[] = []
      for (let i = lo; i < events.length; i++) {
        const e = events[i]!
        if (Date.parse(e.eventAt) >= toMs) break
        if (e.kind === kind) out.push(e)
      }
      return out
    },
    onEvent(fn) {
      listeners.add(fn)
      return () => listeners.delete(fn)
    },
    step,
    apply: (e) => record({ ...e, eventAt: e.eventAt ?? at(Date.now()) }),
    deletePost(id, atMs = Date.now()) {
      const authorId = world.get(id)?.authorId
      return record({
        kind: 'tweet',
        id,
        ...(authorId ? { authorId } : {}),
        action: 'delete',
        eventAt: at(atMs),
      })
    },
    postState,
    userState: (id) => userReason(users.get(id)),
    withheld(id, authorId) {
      const own = posts.get(id)?.withheld
      const author = authorId ?? world.get(id)?.authorId
      const theirs = author === undefined ? undefined : users.get(author)?.withheld
      const all = [...(own ?? []), ...(theirs ?? [])]
      return all.length > 0 ? [...new Set(all)] : undefined
    },
    jobResults(kind, ids) {
      const out: JobResult[] = []
      for (const id of ids) {
        const reason = kind === 'tweets' ? postState(id) : userReason(users.get(id))
        if (!reason) continue
        const changed = since(kind, id, reason)
        const post = kind === 'tweets' ? world.get(id) : undefined
        const user = kind === 'users' ? world.user(id) : undefined
        const userCreated = user?.wire.created_at
        const createdAt =
          post?.wire.created_at ?? (typeof userCreated === 'string' ? userCreated : at(changed))
        out.push({ id, action: 'delete', createdAt, redactedAt: at(changed), reason })
      }
      return out
    },
  }
}
