import {
  RULES_CHANNEL,
  distinctRuleValues,
  listUpstreamRules,
  listen,
  recordPlacedRules,
  recordRejectedRules,
  removeUpstreamRules,
  type Db,
  type Listener,
} from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { conversationIdOfRule } from '../conversation-rule.js'
import type { UpstreamClient } from '../upstream.js'

export interface RuleSyncOptions {
  /** Full reconcile period (repairs drift such as rules deleted upstream by hand). */
  reconcileMs: number
  /** Coalesces a burst of NOTIFYs into one sync. */
  debounceMs: number
}

export interface RuleSyncDeps {
  db: Db
  /** For the LISTEN client (a dedicated connection). */
  databaseUrl: string
  upstream: UpstreamClient
  logger: Logger
  options: RuleSyncOptions
  /** Starts (or resumes) the backfill of each conversation whose rule is placed upstream. */
  backfill: (conversationIds: string[]) => Promise<void>
}

export interface SyncResult {
  added: number
  deleted: number
  rejected: number
  /** Rules placed upstream after this sync. */
  active: number
}

/**
 * Keeps the upstream rule set equal to the union of all apps' rule values: one upstream rule per
 * value, matched by value against what the upstream itself reports (so restarts and crashes never
 * leave duplicates). Values the upstream refuses are recorded with its reason and not offered
 * again while some app holds them.
 */
export class RuleSync {
  private readonly log: Logger
  private listener: Listener | undefined
  private timer: NodeJS.Timeout | undefined
  private debounce: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private again = false
  private closed = false
  private readonly waiters = new Set<() => void>()
  lastResult: SyncResult | undefined
  syncs = 0

  constructor(private readonly deps: RuleSyncDeps) {
    this.log = deps.logger.child({ component: 'rule-sync' })
  }

  async start(): Promise<void> {
    this.listener = listen({
      url: this.deps.databaseUrl,
      channel: RULES_CHANNEL,
      applicationName: 'threadline-ingest-listen',
      logger: this.deps.logger,
      onNotify: () => this.schedule(),
      // Changes made while not listening were missed: a full sync covers them.
      onListening: () => this.schedule(0),
    })
    await this.listener.ready
    this.tick()
  }

  private tick(): void {
    this.timer = setTimeout(() => {
      void this.request().finally(() => {
        if (!this.closed) this.tick()
      })
    }, this.deps.options.reconcileMs)
  }

  private schedule(delay = this.deps.options.debounceMs): void {
    if (this.closed) return
    clearTimeout(this.debounce)
    this.debounce = setTimeout(() => void this.request(), delay)
  }

  /** Runs a sync now (or one more after the running one); never rejects. */
  request(): Promise<void> {
    if (this.closed) return Promise.resolve()
    if (this.running) {
      this.again = true
      return this.running
    }
    this.running = (async () => {
      do {
        this.again = false
        try {
          this.lastResult = await this.sync()
          this.syncs += 1
          // A stream that got a 409 waits for rules: after a sync that left the upstream without
          // any, connecting again would only get another 409.
          if (this.lastResult.active > 0) for (const wake of this.waiters) wake()
        } catch (err) {
          this.log.warn({ err }, 'rule sync failed; retrying at the next change or reconcile')
        }
      } while (this.again && !this.closed)
    })().finally(() => {
      this.running = undefined
    })
    return this.running
  }

  /**
   * Resolves after the next completed sync that leaves rules placed upstream, on close, or on
   * `signal` (the stream waits on this after a 409, besides its retry timer).
   */
  waitForRules(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(done)
        signal.removeEventListener('abort', done)
        resolve()
      }
      this.waiters.add(done)
      signal.addEventListener('abort', done, { once: true })
    })
  }

  /** One reconcile pass. */
  async sync(): Promise<SyncResult> {
    const { db, upstream } = this.deps
    const [desiredList, recorded, placed] = await Promise.all([
      distinctRuleValues(db),
      listUpstreamRules(db),
      upstream.listRules(),
    ])
    const desired = new Set(desiredList)
    const rejected = new Set(recorded.filter((r) => r.status === 'rejected').map((r) => r.value))

    // What the upstream holds, by value; any second rule of one value is a duplicate to remove.
    const upstreamByValue = new Map<string, string>()
    const toDelete: string[] = []
    for (const rule of placed) {
      if (!desired.has(rule.value) || upstreamByValue.has(rule.value)) toDelete.push(rule.id)
      else upstreamByValue.set(rule.value, rule.id)
    }
    const toAdd = desiredList.filter((v) => !upstreamByValue.has(v) && !rejected.has(v))

    if (toDelete.length > 0) await upstream.deleteRules(toDelete)
    const outcome = await upstream.addRules(toAdd)

    const active = new Map(upstreamByValue)
    for (const p of outcome.placed) active.set(p.value, p.id)
    const recordedById = new Map(recorded.map((r) => [r.value, r]))
    const changed = [...active]
      .filter(([value, id]) => {
        const r = recordedById.get(value)
        return !r || r.status !== 'active' || r.upstream_id !== id
      })
      .map(([value, id]) => ({ value, upstream_id: id }))
    await recordPlacedRules(db, changed)
    await recordRejectedRules(db, outcome.rejected)
    for (const r of outcome.rejected) {
      this.log.warn({ value: r.value, reason: r.reason }, 'upstream refused a rule value')
    }
    await removeUpstreamRules(
      db,
      recorded.filter((r) => !desired.has(r.value)).map((r) => r.value),
    )

    const conversations = [...active.keys()]
      .map(conversationIdOfRule)
      .filter((id): id is string => id !== undefined)
    if (conversations.length > 0) await this.deps.backfill(conversations)

    const result = {
      added: outcome.placed.length,
      deleted: toDelete.length,
      rejected: outcome.rejected.length,
      active: active.size,
    }
    if (result.added || result.deleted || result.rejected) {
      this.log.info(result, 'upstream rules synchronised')
    }
    return result
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    clearTimeout(this.debounce)
    for (const wake of this.waiters) wake()
    await this.listener?.close()
    await this.running
  }
}
