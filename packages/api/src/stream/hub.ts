import {
  listAllRules,
  listen,
  RULES_CHANNEL,
  withdrawnAmong,
  type Db,
  type Listener,
} from '@threadline/db'
import type { FieldSelection } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import { parseQuery, RuleIndex } from '@threadline/query'
import {
  rangeStored,
  readStored,
  type Redis,
  type StoredMessage,
  type StoredReader,
} from '@threadline/redis'
import { readStreamMessages, streamLine } from '../pipeline/index.js'
import type { StreamConnection } from './connection.js'
import { parseStreamPost, type StreamPost } from './stored-entry.js'

export interface StreamHubOptions {
  /** The deployment's key prefix: the hub reads `<prefix>:stored`. */
  prefix: string
  /** Entries per XREAD on the `stored` stream. */
  readBatch: number
  /** LISTEN for rule changes on this database (a dedicated connection). */
  databaseUrl: string
  /** Live messages held for a connection while its backfill replays; past this, SlowReader. */
  maxPendingMessages?: number
  /** XREAD BLOCK timeout (how soon close() is noticed when Redis is idle is not tied to it). */
  blockMs?: number
}

export interface StreamHubDeps {
  db: Db
  /** For backfill XRANGEs; the live reader duplicates it into a dedicated connection. */
  redis: Redis
  logger: Logger
  options: StreamHubOptions
}

interface RulePayload {
  appId: string
  id: string
  tag: string
}

interface AppRules {
  refs: number
  rules: Map<string, { value: string; tag: string }>
  loading: Promise<void> | undefined
  dirty: boolean
  retry: NodeJS.Timeout | undefined
}

interface Subscriber {
  conn: StreamConnection
  appId: string
  /** Set on a conversation's feed (docs/api.md §5.3): its Posts, without rules or matching_rules. */
  conversationId?: string
  sel: FieldSelection
  selKey: string
  /** Live lines waiting while the backfill runs; null once live. */
  pending: string[] | null
}

export interface AppLease {
  /** The app's rules when the lease was taken (0 → the route answers 409). */
  ruleCount: number
  /** Gives the lease back; the app's rules leave the index with its last lease. */
  release(): void
}

const selKeyOf = (sel: FieldSelection) =>
  [sel.tweetFields, sel.expansions, sel.userFields].map((s) => [...s].sort().join(',')).join('|')

/**
 * The per-process fan-out of the filtered stream (docs/architecture.md §1, step 6). One reader follows the
 * `stored` stream; each Post is matched once against one RuleIndex holding the rules of the apps
 * with an open connection, shaped once per distinct field selection among the recipients, and
 * written once to each connection of each matching app with that app's `matching_rules`.
 * Conversation feeds (docs/api.md §5.3) ride the same reader: a Post goes to the feeds of its
 * `conversation_id`, shaped with the same cache, without `matching_rules`.
 */
export class StreamHub {
  private readonly index = new RuleIndex<RulePayload>()
  private readonly apps = new Map<string, AppRules>()
  private readonly subscribers = new Map<string, Set<Subscriber>>()
  /** Conversation feeds by conversation id. */
  private readonly followers = new Map<string, Set<Subscriber>>()
  private reader: StoredReader | undefined
  private listener: Listener | undefined
  /** The last stream id whose recipients were decided; a backfill replays up to it. */
  private dispatchedId = '0-0'
  private readonly log: Logger
  private closed = false
  /** Posts delivered (connections × Posts), for benchmarks and logs. */
  delivered = 0

  constructor(private readonly deps: StreamHubDeps) {
    this.log = deps.logger.child({ component: 'stream-hub' })
  }

  async start(): Promise<void> {
    const { options } = this.deps
    this.listener = listen({
      url: options.databaseUrl,
      channel: RULES_CHANNEL,
      applicationName: 'threadline-api-stream',
      logger: this.deps.logger,
      onNotify: (appId) => {
        if (this.apps.has(appId)) void this.reload(appId)
      },
      // Notifications sent while disconnected are lost: reload every loaded app.
      onListening: () => {
        for (const appId of this.apps.keys()) void this.reload(appId)
      },
    })
    this.reader = readStored(this.deps.redis, {
      prefix: options.prefix,
      batch: options.readBatch,
      blockMs: options.blockMs,
      logger: this.deps.logger,
      onMessages: (messages) => this.dispatch(messages),
    })
    await Promise.all([this.listener.ready, this.reader.ready])
    this.dispatchedId = this.reader.lastId
  }

  async close(): Promise<void> {
    this.closed = true
    for (const app of this.apps.values()) clearTimeout(app.retry)
    await Promise.all([this.reader?.close(), this.listener?.close()])
  }

  /** Number of rules loaded for an app (0 when none or not loaded). */
  ruleCount(appId: string): number {
    return this.apps.get(appId)?.rules.size ?? 0
  }

  /**
   * Keeps an app's rules in the index while held; the first lease loads them (and waits for it),
   * the last release drops them. Rejects when the rules cannot be read.
   */
  async retainApp(appId: string): Promise<AppLease> {
    let app = this.apps.get(appId)
    if (!app) {
      app = { refs: 0, rules: new Map(), loading: undefined, dirty: false, retry: undefined }
      this.apps.set(appId, app)
    }
    app.refs += 1
    let released = false
    const release = () => {
      if (released) return
      released = true
      const a = this.apps.get(appId)
      if (!a || (a.refs -= 1) > 0) return
      clearTimeout(a.retry)
      this.apps.delete(appId)
      for (const id of a.rules.keys()) this.index.remove(id)
    }
    try {
      // A lease taken while another loads must still see the newest rules: ask for a fresh pass.
      await this.reload(appId, true)
    } catch (err) {
      release()
      throw err
    }
    return { ruleCount: this.ruleCount(appId), release }
  }

  /**
   * Starts delivering to a connection: its field selection, and a replay of the last
   * `backfillMinutes` first (live Posts are held meanwhile, so order is kept and nothing is missed).
   */
  attach(conn: StreamConnection, sel: FieldSelection, backfillMinutes = 0): void {
    this.subscribe(this.subscribers, conn.appId, { conn, appId: conn.appId, sel }, backfillMinutes)
  }

  /**
   * Starts a conversation's feed on a connection: every Post stored from now on whose
   * `conversation_id` is `conversationId`, after a replay of the last `backfillMinutes` as attach.
   */
  attachConversation(
    conn: StreamConnection,
    conversationId: string,
    sel: FieldSelection,
    backfillMinutes = 0,
  ): void {
    const sub = { conn, appId: conn.appId, conversationId, sel }
    this.subscribe(this.followers, conversationId, sub, backfillMinutes)
  }

  private subscribe(
    registry: Map<string, Set<Subscriber>>,
    key: string,
    base: Omit<Subscriber, 'selKey' | 'pending'>,
    backfillMinutes: number,
  ): void {
    const sub: Subscriber = {
      ...base,
      selKey: selKeyOf(base.sel),
      pending: backfillMinutes > 0 ? [] : null,
    }
    let set = registry.get(key)
    if (!set) registry.set(key, (set = new Set()))
    set.add(sub)
    sub.conn.onClose(() => {
      const s = registry.get(key)
      s?.delete(sub)
      if (s?.size === 0) registry.delete(key)
    })
    if (backfillMinutes > 0) {
      const since = Date.now() - backfillMinutes * 60_000
      void this.backfill(sub, since, this.dispatchedId)
    }
  }

  private async backfill(sub: Subscriber, sinceMs: number, untilId: string): Promise<void> {
    try {
      for await (const page of rangeStored(
        this.deps.redis,
        this.deps.options.prefix,
        sinceMs,
        untilId,
      )) {
        if (!sub.conn.open) return
        const items: Array<{ item: StreamPost; rules: string }> = []
        // The replay holds Posts as they were stored: those X withdrew since are left out.
        const posts = [...this.postsOf(page)]
        const withdrawn = await this.withdrawnOf(posts, { failOpen: false })
        for (const item of posts) {
          if (withdrawn.has(item.post.id)) continue
          if (sub.conversationId !== undefined) {
            if (item.post.conversation_id === sub.conversationId) items.push({ item, rules: '' })
            continue
          }
          const rules = this.index
            .match(item.wire, undefined, item.authorWire)
            .filter((r) => r.appId === sub.appId)
          if (rules.length > 0) items.push({ item, rules: rulesJson(rules) })
        }
        if (items.length === 0) continue
        const shaped = await this.shape(
          items.map((i) => i.item),
          sub.sel,
        )
        for (const { item, rules } of items) {
          const message = shaped.get(item.post.id)
          if (message === undefined) continue
          if (!sub.conn.send(streamLine(message, rules))) return
          this.delivered += 1
        }
      }
    } catch (err) {
      this.log.warn({ err, appId: sub.appId }, 'stream backfill failed; continuing live')
    }
    const held = sub.pending ?? []
    sub.pending = null
    for (const line of held) {
      if (!sub.conn.send(line)) return
      this.delivered += 1
    }
  }

  /**
   * Of these Posts, those X withdrew since they were published (docs/api.md §7): the live path
   * checks the instant between a Post's storing and its delivery, the replay minutes of history.
   * Live, a failed check delivers (the writer publishes no Post withdrawn when stored); a replay
   * fails instead, and goes on live.
   */
  private async withdrawnOf(
    items: readonly StreamPost[],
    { failOpen = true }: { failOpen?: boolean } = {},
  ): Promise<Set<string>> {
    try {
      const found = await withdrawnAmong(
        this.deps.db,
        'tweet',
        items.map((i) => i.post.id),
      )
      return new Set(found.map((w) => w.id))
    } catch (err) {
      if (!failOpen) throw err
      this.log.warn({ err }, 'checking stream Posts for withdrawals failed; delivering them')
      return new Set()
    }
  }

  private *postsOf(messages: readonly StoredMessage[]): Generator<StreamPost> {
    for (const m of messages) {
      if (m.type !== 'post') continue
      const item = parseStreamPost(m.streamId, m.id, m.body)
      if (item) yield item
      else this.log.warn({ streamId: m.streamId, id: m.id }, 'unreadable stored entry skipped')
    }
  }

  /** Each Post's message for one selection, by id (see readStreamMessages). */
  private shape(items: readonly StreamPost[], sel: FieldSelection): Promise<Map<string, string>> {
    const authors = items.flatMap((i) => (i.author ? [i.author] : []))
    return readStreamMessages(
      this.deps.db,
      items.map((i) => i.post),
      authors,
      sel,
      (err) =>
        this.log.warn(
          { err },
          'resolving stream expansions failed; sending Posts without includes',
        ),
    )
  }

  /** One batch from the `stored` stream, in order. */
  private async dispatch(messages: StoredMessage[]): Promise<void> {
    const last = messages[messages.length - 1]!.streamId
    const matching = this.index.size > 0 && this.subscribers.size > 0
    if (!matching && this.followers.size === 0) {
      this.dispatchedId = last
      return
    }
    // Match, and decide every recipient now (synchronously with dispatchedId, see attach).
    const deliveries: Array<{ item: StreamPost; subs: Array<[Subscriber, string]> }> = []
    const groups = new Map<string, { sel: FieldSelection; items: StreamPost[] }>()
    const addTo = (
      subs: Array<[Subscriber, string]>,
      sub: Subscriber,
      rules: string,
      item: StreamPost,
    ) => {
      subs.push([sub, rules])
      let g = groups.get(sub.selKey)
      if (!g) groups.set(sub.selKey, (g = { sel: sub.sel, items: [] }))
      if (g.items[g.items.length - 1] !== item) g.items.push(item)
    }
    for (const item of this.postsOf(messages)) {
      const subs: Array<[Subscriber, string]> = []
      const conversation = item.post.conversation_id
      const feeds = conversation === null ? undefined : this.followers.get(conversation)
      if (feeds) for (const sub of feeds) addTo(subs, sub, '', item)
      const matches = matching ? this.index.match(item.wire, undefined, item.authorWire) : []
      const byApp = new Map<string, RulePayload[]>()
      for (const r of matches) {
        const list = byApp.get(r.appId)
        if (list) list.push(r)
        else byApp.set(r.appId, [r])
      }
      for (const [appId, rules] of byApp) {
        const set = this.subscribers.get(appId)
        if (!set) continue
        const json = rulesJson(rules)
        for (const sub of set) addTo(subs, sub, json, item)
      }
      if (subs.length > 0) deliveries.push({ item, subs })
    }
    this.dispatchedId = last
    if (deliveries.length === 0) return

    const shaped = new Map<string, Map<string, string>>()
    const [withdrawn] = await Promise.all([
      this.withdrawnOf(deliveries.map((d) => d.item)),
      ...[...groups].map(async ([key, g]) => shaped.set(key, await this.shape(g.items, g.sel))),
    ])
    for (const { item, subs } of deliveries) {
      if (withdrawn.has(item.post.id)) continue
      for (const [sub, rules] of subs) {
        const message = shaped.get(sub.selKey)!.get(item.post.id)
        if (message === undefined) continue
        const line = streamLine(message, rules)
        if (sub.pending) {
          sub.pending.push(line)
          if (sub.pending.length > (this.deps.options.maxPendingMessages ?? 10_000)) {
            sub.pending = []
            sub.conn.disconnect('SlowReader')
          }
        } else if (sub.conn.send(line)) {
          this.delivered += 1
        }
      }
    }
  }

  /**
   * Brings an app's rules in the index up to date. Calls during a pass ask for one more pass;
   * `fresh` waits for a pass that started after the call. A failed pass started by a
   * notification is retried, since no other notification may come.
   */
  private reload(appId: string, fresh = false): Promise<void> {
    const app = this.apps.get(appId)
    if (!app) return Promise.resolve()
    app.dirty = true
    if (app.loading) {
      if (!fresh) return app.loading
      // The pass under way may have read before this call: wait for the next one too.
      return app.loading.catch(() => undefined).then(() => this.reload(appId))
    }
    const pass = (async () => {
      while (app.dirty && this.apps.get(appId) === app && !this.closed) {
        app.dirty = false
        const rows = await listAllRules(this.deps.db, [appId])
        if (this.apps.get(appId) !== app) return
        const next = new Map(rows.map((r) => [r.id, { value: r.value, tag: r.tag ?? '' }]))
        for (const id of app.rules.keys()) if (!next.has(id)) this.index.remove(id)
        for (const [id, rule] of next) {
          const prior = app.rules.get(id)
          if (prior && prior.value === rule.value && prior.tag === rule.tag) continue
          const parsed = parseQuery(rule.value, { maxLength: 4096 })
          if (!parsed.ok) {
            this.log.warn(
              { appId, ruleId: id, errors: parsed.errors },
              'stored rule does not parse',
            )
            next.delete(id)
            continue
          }
          this.index.add(id, parsed.ast, { appId, id, tag: rule.tag })
        }
        app.rules = next
      }
    })()
    app.loading = pass
    void pass
      .catch((err: unknown) => {
        this.log.warn({ err, appId }, 'loading stream rules failed; retrying')
        clearTimeout(app.retry)
        app.retry = setTimeout(() => void this.reload(appId).catch(() => undefined), 1_000)
        app.retry.unref()
      })
      .finally(() => {
        if (app.loading === pass) app.loading = undefined
      })
    return pass
  }
}

function rulesJson(rules: readonly RulePayload[]): string {
  return JSON.stringify(rules.map((r) => ({ id: r.id, tag: r.tag })))
}
