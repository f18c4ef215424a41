import type { JobResult, WithdrawalEvent } from './withdrawal-event.js'
import type { World } from './world.js'

interface PostState {
  deletedAt?: number
  droppedAt?: number
  withheld?: string[]
}

interface UserState {
  protectedAt?: number
  suspendedAt?: number
  deletedAt?: number
  withheld?: string[]
}

const at = (ms: number) => new Date(ms).toISOString()

/** What the world's withdrawals have made of its Posts and users: each state and since when. */
export class WithdrawalStates {
  private readonly posts = new Map<string, PostState>()
  private readonly users = new Map<string, UserState>()

  constructor(private readonly world: World) {}

  private postOf(id: string): PostState {
    let s = this.posts.get(id)
    if (!s) this.posts.set(id, (s = {}))
    return s
  }

  private userOf(id: string): UserState {
    let s = this.users.get(id)
    if (!s) this.users.set(id, (s = {}))
    return s
  }

  apply(e: WithdrawalEvent): void {
    const ms = Date.parse(e.eventAt)
    if (e.kind === 'tweet') {
      const s = this.postOf(e.id)
      if (e.action === 'delete') s.deletedAt ??= ms
      else if (e.action === 'drop') s.droppedAt = ms
      else if (e.action === 'undrop') s.droppedAt = undefined
      else if (e.action === 'withheld') s.withheld = e.withheldInCountries
      else if (e.action === 'tweet_edit') this.edit(e.id)
      return
    }
    const s = this.userOf(e.id)
    if (e.action === 'user_protect') s.protectedAt = ms
    else if (e.action === 'user_unprotect') s.protectedAt = undefined
    else if (e.action === 'user_suspend') s.suspendedAt = ms
    else if (e.action === 'user_unsuspend') s.suspendedAt = undefined
    else if (e.action === 'user_delete') s.deletedAt = ms
    else if (e.action === 'user_undelete') s.deletedAt = undefined
    else if (e.action === 'user_withheld') s.withheld = e.withheldInCountries
  }

  // An edit changes the text of the Post served by lookup (a re-fetch finds the new text).
  private edit(id: string): void {
    const post = this.world.get(id)
    if (!post) return
    post.wire.text = `${post.wire.text.slice(0, 270)} (edited)`
    post.json = undefined
  }

  isDeleted(id: string): boolean {
    return this.posts.get(id)?.deletedAt !== undefined
  }

  isDropped(id: string): boolean {
    return this.posts.get(id)?.droppedAt !== undefined
  }

  /** A user's reversible states, for the mix to draw the reversal of one. */
  user(id: string): Readonly<UserState> {
    return this.users.get(id) ?? {}
  }

  userState(id: string): JobResult['reason'] | undefined {
    const s = this.users.get(id)
    if (!s) return undefined
    if (s.deletedAt !== undefined) return 'deactivated'
    if (s.suspendedAt !== undefined) return 'suspended'
    if (s.protectedAt !== undefined) return 'protected'
    return undefined
  }

  postState(id: string, authorId?: string): JobResult['reason'] | undefined {
    const s = this.posts.get(id)
    if (s?.deletedAt !== undefined) return 'deleted'
    const author = authorId ?? this.world.get(id)?.authorId
    const reason = author === undefined ? undefined : this.userState(author)
    if (reason) return reason
    if (s?.droppedAt !== undefined) return 'dropped'
    return undefined
  }

  withheld(id: string, authorId?: string): string[] | undefined {
    const own = this.posts.get(id)?.withheld
    const author = authorId ?? this.world.get(id)?.authorId
    const theirs = author === undefined ? undefined : this.users.get(author)?.withheld
    const all = [...(own ?? []), ...(theirs ?? [])]
    return all.length > 0 ? [...new Set(all)] : undefined
  }

  /** When the state that `reason` names began. */
  private since(kind: 'tweets' | 'users', id: string, reason: JobResult['reason']): number {
    if (kind === 'tweets' && (reason === 'deleted' || reason === 'dropped')) {
      const s = this.posts.get(id)
      return (reason === 'deleted' ? s?.deletedAt : s?.droppedAt) ?? 0
    }
    const author = kind === 'users' ? id : this.world.get(id)?.authorId
    const s = author === undefined ? undefined : this.users.get(author)
    if (!s) return 0
    if (reason === 'deactivated') return s.deletedAt ?? 0
    return (reason === 'suspended' ? s.suspendedAt : s.protectedAt) ?? 0
  }

  jobResults(kind: 'tweets' | 'users', ids: Iterable<string>): JobResult[] {
    const out: JobResult[] = []
    for (const id of ids) {
      const reason = kind === 'tweets' ? this.postState(id) : this.userState(id)
      if (!reason) continue
      const changed = this.since(kind, id, reason)
      const post = kind === 'tweets' ? this.world.get(id) : undefined
      const userCreated = kind === 'users' ? this.world.user(id)?.wire.created_at : undefined
      const createdAt =
        post?.wire.created_at ?? (typeof userCreated === 'string' ? userCreated : at(changed))
      out.push({ id, action: 'delete', createdAt, redactedAt: at(changed), reason })
    }
    return out
  }
}
