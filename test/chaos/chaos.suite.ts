import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createSubscription, createWebhook, sql } from '@threadline/db'
import { tokenize } from '@threadline/domain'
import { silentLogger } from '@threadline/logger'
import { createQueue } from '@threadline/queue'
import {
  closeRedis,
  createRedis,
  storedStreamKey,
  unpackStored,
  type Redis,
} from '@threadline/redis'
import { waitFor } from '@threadline/testing'
import {
  openSlowReader,
  startWebhookReceiver,
  type WebhookReceiver,
  startSearchPoller,
  startStreamReader,
  StatusTally,
  type Poller,
  type StreamReader,
} from './clients.js'
import { formatSummary, type ChaosSummary, type FaultResult } from './report.js'
import {
  findBinaries,
  MUST_RUN,
  type App,
  type ServiceProcess,
  type Stack,
  startStack,
} from './stack.js'

/**
 * The fault-injection suite (issue 8 item 4): the real system as separate processes over a private
 * Postgres and Redis, faults injected while the simulator streams and clients read, and at the end
 * every Post the upstream sent stored exactly once. Run by `pnpm test:chaos`.
 *
 * Knobs (test-harness settings, not service configuration):
 *   CHAOS_RATE           Posts per second the simulator makes (default 30)
 *   CHAOS_FAULT_TIMEOUT_MS  how long one fault may take to recover (default 90000)
 *   CHAOS_RSS_FACTOR     end RSS bound as a multiple of start RSS (default 3; plus 200 MB slack)
 *   CHAOS_ROUNDS         how many times the whole list of faults runs (default 2)
 *   CHAOS_FRESH          Posts that must be sent after a fault before it counts as recovered (60)
 *   CHAOS_KEEP=1         keep the temp dir (logs, data) after the run
 *   CHAOS_OUTAGE_MS      how long the upstream stays down in the outage fault (default 20000)
 *
 * The simulator behaves as X for most access levels: it refuses `backfill_minutes` and sends what
 * it makes while no client is connected to no one; the services run on their default settings, so
 * every window (reconnect, outage, takeover) is closed by the ingest's recovery alone.
 */
const knobs = {
  rate: Number(process.env.CHAOS_RATE ?? 30),
  faultTimeoutMs: Number(process.env.CHAOS_FAULT_TIMEOUT_MS ?? 90_000),
  rssFactor: Number(process.env.CHAOS_RSS_FACTOR ?? 3),
  rounds: Number(process.env.CHAOS_ROUNDS ?? 2),
  fresh: Number(process.env.CHAOS_FRESH ?? 60),
  keep: process.env.CHAOS_KEEP === '1',
  outageMs: Number(process.env.CHAOS_OUTAGE_MS ?? 20_000),
}
const RSS_SLACK = 200 * 1024 * 1024

const binaries = findBinaries()
if (!binaries.ok && !MUST_RUN) {
  console.warn(
    `\nchaos suite SKIPPED: ${binaries.reason}. It runs its own Postgres and Redis servers so that ` +
      'it can restart them; install them (or run it in CI, where they are present).\n',
  )
}

// Keyword rules beside the demo conversations: words and a hashtag the simulator's vocabulary uses.
const KEYWORD_RULES = ['postgres', 'redis', 'backfill', '#opensource']
// The slow reader's app matches common words so its buffer fills fast.
/** The activity subscription's keyword (post.create events delivered to a webhook). */
const EVENT_KEYWORD = 'postgres'
const SLOW_RULE = 'data OR thread OR stream OR post OR reply OR datos OR hilo OR think'

interface Sent {
  total: number
  ids: string[]
  /** Matched while no stream was connected: sent to no one, as X does. */
  unheard: string[]
}

describe.skipIf(!binaries.ok && !MUST_RUN)(
  'chaos: faults while the simulator streams and clients read',
  () => {
    let stack: Stack
    let reader: App
    let slow: App
    let poller: Poller | undefined
    let streamReader: StreamReader | undefined
    const tally = new StatusTally()
    const summary: ChaosSummary = { faults: [], memory: [] }
    const startMemory = new Map<ServiceProcess, ReturnType<ServiceProcess['memory']>>()
    let delivery = false
    let webhook: WebhookReceiver | undefined
    /** What had been sent when the subscription was made: events are expected for what came after. */
    let sentBeforeSubscription = new Set<string>()
    let queueRedis: Redis | undefined
    let postsQueue: ReturnType<typeof createQueue> | undefined

    beforeAll(async () => {
      if (!binaries.ok) throw new Error(`chaos suite cannot run in CI: ${binaries.reason}`)
      delivery = await deliveryExists()
      stack = await startStack(binaries.bin, {
        simulatorRate: knobs.rate,
        writers: 2,
        keep: knobs.keep,
        extraRoles: delivery ? ['delivery'] : [],
        // The webhook receiver is on loopback; failed deliveries retry within a second.
        env: { WEBHOOK_ALLOW_PRIVATE: 'true' },
        tuning: { delivery: { retryBaseMs: 200, sweepMs: 500, timeoutMs: 5_000 } },
      })
      queueRedis = createRedis(stack.redis.url, 'producer', 'chaos')
      postsQueue = createQueue('posts', {
        connection: queueRedis,
        prefix: stack.prefix,
        logger: silentLogger(),
      })
      reader = await stack.createApp('chaos-reader')
      slow = await stack.createApp('chaos-slow')
      const demo = await stack.sim<{ conversation_ids: string[] }>('GET', '/_sim/demo')
      const rules = [
        ...demo.conversation_ids.map((id) => ({ value: `conversation_id:${id}`, tag: 'demo' })),
        ...KEYWORD_RULES.map((value) => ({ value, tag: 'keyword' })),
      ]
      const added = await stack.callApi(reader.token, 'POST', '/2/tweets/search/stream/rules', {
        add: rules,
      })
      expect(added, JSON.stringify(added.body)).toMatchObject({ status: 201 })
      const addedSlow = await stack.callApi(slow.token, 'POST', '/2/tweets/search/stream/rules', {
        add: [{ value: SLOW_RULE, tag: 'slow' }],
      })
      expect(addedSlow, JSON.stringify(addedSlow.body)).toMatchObject({ status: 201 })
      poller = startSearchPoller({
        apiUrl: stack.apiUrl,
        token: reader.token,
        queries: [
          ...demo.conversation_ids.map((id) => `conversation_id:${id}`),
          ...KEYWORD_RULES.slice(0, 2),
        ],
        tally,
        intervalMs: 200,
      })
      streamReader = startStreamReader({ apiUrl: stack.apiUrl, token: reader.token, tally })
      if (delivery) {
        // Registered directly in Postgres: the API's activity routes are not what is under test here.
        webhook = await startWebhookReceiver()
        const hook = await createWebhook(stack.db, reader.appId, webhook.url, { cap: 10 })
        const sub = await createSubscription(
          stack.db,
          reader.appId,
          { event_type: 'post.create', keyword: EVENT_KEYWORD, webhook_id: hook!.id, tag: 'chaos' },
          { cap: 100 },
        )
        expect(sub.kind).toBe('created')
        sentBeforeSubscription = await sentIds()
      }
    }, 240_000)

    afterAll(async () => {
      await poller?.stop()
      await streamReader?.stop()
      await webhook?.close()
      await postsQueue?.close()
      if (queueRedis) await closeRedis(queueRedis)
      if (stack && summary.faults.some((f) => !f.ok)) {
        for (const p of stack.processes())
          console.log(`--- ${p.name} (last lines of ${p.logFile}) ---\n${p.logTail(15)}`)
      }
      console.log(formatSummary(summary))
      if (knobs.keep && stack) console.log(`chaos: logs and data kept in ${stack.dir}`)
      await stack?.close()
    }, 120_000)

    /**
     * Ids the upstream sent so far, whether a stream heard them or not (a Post sent twice counts
     * once): what X would have delivered to a client that never went away.
     */
    async function sentIds(): Promise<Set<string>> {
      const sent = await stack.sim<Sent>('GET', '/_sim/sent')
      return new Set([...sent.ids, ...sent.unheard])
    }

    /** How many of `ids` are stored. */
    async function storedCount(ids: Set<string>): Promise<number> {
      return ids.size - (await missing(ids)).length
    }

    /**
     * Doubled Posts that a primary key cannot hide: the Posts a conversation's counter holds beyond
     * its rows (a batch counted twice).
     */
    async function overCounted(): Promise<number> {
      const { rows } = await sql<{ n: string | null }>`
      SELECT sum(c.post_count - (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id)) AS n
      FROM conversations c
      WHERE c.post_count > (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id)`.execute(
        stack.db,
      )
      return Number(rows[0]?.n ?? 0)
    }

    /** Posts appended to the `stored` stream more than once (kept long enough by the stack). */
    async function republished(): Promise<number> {
      const seen = new Map<string, number>()
      let start = '-'
      for (;;) {
        const page = (await queueRedis!.xrange(
          storedStreamKey(stack.prefix),
          start,
          '+',
          'COUNT',
          500,
        )) as Array<[string, string[]]>
        for (const [, fields] of page) {
          for (const e of unpackStored(fields)) {
            if (e.type === 'post') seen.set(e.id, (seen.get(e.id) ?? 0) + 1)
          }
        }
        if (page.length < 500) break
        start = `(${page.at(-1)![0]}`
      }
      return [...seen.values()].filter((n) => n > 1).length
    }

    /** The running ingest that leads (its log says so last), and whether a standby runs beside it. */
    function leadingIngest(): ServiceProcess {
      const running = stack.ingests.filter((p) => p.running)
      const leader = running.filter((p) => p.logged('"leading')).at(-1)
      if (!leader) throw new Error('no running ingest has led')
      return leader
    }

    async function missing(ids: Set<string>): Promise<string[]> {
      const list = [...ids]
      const { rows } = await sql<{ id: string }>`
      SELECT id::text AS id FROM posts WHERE id = ANY(${list}::bigint[])`.execute(stack.db)
      const stored = new Set(rows.map((r) => r.id))
      return list.filter((id) => !stored.has(id))
    }

    /**
     * Waits until Posts were sent after the fault (`before`: what had been sent when it began) and
     * every Post sent up to then is in Postgres: the pipeline carries new traffic again, nothing lost.
     */
    async function settle(what: string, before?: Set<string>): Promise<Set<string>> {
      let ids = new Set<string>()
      await waitFor(
        `${what}: new Posts sent after the fault`,
        async () => {
          ids = await sentIds()
          let fresh = 0
          for (const id of ids) if (!before?.has(id)) fresh++
          return fresh >= knobs.fresh
        },
        { timeoutMs: knobs.faultTimeoutMs, intervalMs: 250 },
      )
      let lastMissing = ids.size
      await waitFor(
        `${what}: all ${ids.size} Posts sent so far stored`,
        async () => {
          lastMissing = (await missing(ids)).length
          return lastMissing === 0
        },
        { timeoutMs: knobs.faultTimeoutMs, intervalMs: 250 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; ${lastMissing} still missing`)
      })
      if (webhook) {
        const expected = await expectedEvents(ids)
        let undelivered = expected
        await waitFor(
          `${what}: the ${expected.length} subscription events so far delivered`,
          () => {
            undelivered = expected.filter((id) => !webhook!.postIds.has(id))
            return undelivered.length === 0
          },
          { timeoutMs: knobs.faultTimeoutMs, intervalMs: 250 },
        ).catch((error: Error) => {
          throw new Error(`${error.message}; ${undelivered.length} never delivered`)
        })
      }
      return ids
    }

    /**
     * Posts sent since the subscription was made whose text holds the keyword: each must reach the
     * webhook (at least once). Tokenised as the delivery service matches keywords.
     */
    async function expectedEvents(ids: Set<string>): Promise<string[]> {
      const fresh = [...ids].filter((id) => !sentBeforeSubscription.has(id))
      if (fresh.length === 0) return []
      const { rows } = await sql<{ id: string; text: string }>`
      SELECT id::text AS id, text FROM posts WHERE id = ANY(${fresh}::bigint[])`.execute(stack.db)
      return rows.filter((r) => tokenize(r.text).includes(EVENT_KEYWORD)).map((r) => r.id)
    }

    /** Opens a stream for the app and closes it at once: its status tells whether a slot was free. */
    async function streamStatus(token: string): Promise<number> {
      const controller = new AbortController()
      const res = await fetch(`${stack.apiUrl}/2/tweets/search/stream`, {
        headers: { authorization: `Bearer ${token}` },
        signal: controller.signal,
      })
      controller.abort()
      return res.status
    }

    function servicesAlive(except: ServiceProcess[] = []) {
      const ingests = stack.ingests.filter((p) => !p.killed)
      const dead = [stack.simulator, ...ingests, stack.api, ...stack.writers, ...stack.extra]
        .filter((p) => !except.includes(p))
        .filter((p) => !p.running)
      if (dead.length > 0) {
        throw new Error(
          `service(s) exited: ${dead.map((p) => `${p.name}\n${p.logTail(20)}`).join('\n')}`,
        )
      }
    }

    /**
     * Runs one fault: inject (it returns once the stream or the service is back), then wait (with
     * deadlines) until every Post sent up to then is stored (the window closed), and until the
     * pipeline carries new traffic again.
     */
    async function runFault(name: string, inject: () => Promise<string | void>): Promise<void> {
      const result: FaultResult = { name, ok: false }
      summary.faults.push(result)
      const started = Date.now()
      try {
        const before = await sentIds()
        const doubledBefore = await overCounted()
        result.detail = (await inject()) || undefined
        const backAt = Date.now()
        const atBack = await sentIds()
        let stored = 0
        await waitFor(
          `${name}: the window closed (all ${atBack.size} Posts sent until the stream was back stored)`,
          async () => {
            stored = await storedCount(atBack)
            return stored === atBack.size
          },
          { timeoutMs: knobs.faultTimeoutMs, intervalMs: 250 },
        )
        result.closeMs = Date.now() - backAt
        const ids = await settle(name, before)
        servicesAlive()
        result.recoveredMs = Date.now() - started
        const fresh = new Set([...ids].filter((id) => !before.has(id)))
        result.sent = fresh.size
        result.stored = await storedCount(fresh)
        result.doubled = (await overCounted()) - doubledBefore
        result.ok = true
      } catch (error) {
        result.detail = (error as Error).message.split('\n')[0]
        throw error
      }
    }

    async function streamConnects(): Promise<number> {
      return (await stack.sim<{ streamConnects: number }>('GET', '/_sim/stats')).streamConnects
    }

    /** Waits until the ingest holds a new stream connection; how many were made since `before`. */
    async function streamBack(before: number): Promise<number> {
      let made = 0
      await waitFor(
        'the ingest to connect to the upstream again',
        async () => {
          const s = await stack.sim<{ streamConnects: number; streamConnections: number }>(
            'GET',
            '/_sim/stats',
          )
          made = s.streamConnects - before
          return made > 0 && s.streamConnections === 1
            ? true
            : `${made} new, ${s.streamConnections} open`
        },
        { timeoutMs: knobs.faultTimeoutMs, intervalMs: 100 },
      )
      return made
    }

    it('survives every fault with each sent Post stored exactly once', async () => {
      // Warm-up: Posts flowing end to end before the first fault.
      await waitFor(
        'Posts stored and streamed to the client',
        async () => {
          const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(
            stack.db,
          )
          return Number(rows[0]!.n) > 0 && streamReader!.ids.size > 0
        },
        { timeoutMs: knobs.faultTimeoutMs, intervalMs: 250 },
      )
      await settle('warm-up')
      for (const p of stack.processes()) startMemory.set(p, p.memory())

      for (let round = 1; round <= knobs.rounds; round++) {
        const fault = (name: string, inject: () => Promise<string | void>) =>
          runFault(knobs.rounds > 1 ? `${name} (round ${round})` : name, inject)

        await fault('drop the upstream connection', async () => {
          const before = await streamConnects()
          await stack.sim('POST', '/_sim/faults', { fault: 'drop' })
          const n = await streamBack(before)
          return `reconnected (${n} new connection(s))`
        })

        await fault(`upstream outage of ${knobs.outageMs / 1000} s`, async () => {
          const before = await streamConnects()
          // Every stream connection refused with a 503 while it lasts, the open one dropped.
          await stack.sim('POST', '/_sim/faults', {
            fault: 'fail',
            route: 'stream',
            status: 503,
            count: 1_000_000,
          })
          await stack.sim('POST', '/_sim/faults', { fault: 'drop' })
          // The outage's length is the fault itself, not a wait for an event.
          await new Promise((resolve) => setTimeout(resolve, knobs.outageMs))
          await stack.sim('POST', '/_sim/faults', { fault: 'reset' })
          const n = await streamBack(before)
          return `503 for ${knobs.outageMs / 1000} s, then ${n} new connection(s)`
        })

        await fault('kill -9 the leading ingest (a standby takes over)', async () => {
          const standby = stack.startIngest()
          await waitFor('the standby ingest started', () => standby.logged('ingest started'), {
            timeoutMs: 180_000,
            intervalMs: 100,
          })
          const victim = leadingIngest()
          const before = await streamConnects()
          await victim.kill('SIGKILL')
          await streamBack(before)
          await waitFor('the standby leading', () => standby.logged('"leading'), {
            timeoutMs: knobs.faultTimeoutMs,
            intervalMs: 100,
          })
          return `${victim.name} killed, ${standby.name} took the lease`
        })

        await fault('kill -9 a writer', async () => {
          // Mid-batch when we can catch one: a batch is in flight while a posts job is active.
          const midBatch = await waitFor(
            'a posts batch in flight',
            async () => (await postsQueue!.getActiveCount()) > 0,
            { timeoutMs: 20_000, intervalMs: 5 },
          ).catch(() => false)
          const victim = stack.writers[0]!
          await victim.kill('SIGKILL')
          stack.writers.shift()
          stack.startWriter()
          return `${victim.name} killed${midBatch ? ' with a batch in flight' : ''}, ${stack.writers.at(-1)!.name} started`
        })

        await fault('restart Redis', async () => {
          await stack.redis.restart('SIGKILL')
          return 'SIGKILL, restarted from its AOF'
        })

        await fault('restart Postgres', async () => {
          await stack.pg.restart('fast')
          return 'pg_ctl stop -m fast, start'
        })

        await fault('crash Postgres', async () => {
          await stack.pg.restart('immediate')
          return 'pg_ctl stop -m immediate (no checkpoint; fsync on), start: WAL recovery'
        })

        if (delivery) {
          await fault('kill -9 delivery', async () => {
            const victim = stack.extra.find((p) => p.name.startsWith('delivery') && p.running)!
            await victim.kill('SIGKILL')
            stack.extra.splice(stack.extra.indexOf(victim), 1)
            const next = stack.startRole('delivery')
            return `${victim.name} killed, ${next.name} started`
          })

          await fault('webhook receiver failing', async () => {
            const refused = webhook!.refused
            webhook!.failNext(5)
            await waitFor(
              'the webhook receiver to refuse 5 deliveries',
              () => (webhook!.refused >= refused + 5 ? true : false),
              { timeoutMs: knobs.faultTimeoutMs },
            )
            return '5 deliveries answered 503, retried'
          })
        }
      }

      // Once, last: its bursts of Posts would make a later upstream reconnect's one-minute replay
      // (backfill_minutes) larger than the simulator lets a reader fall behind.
      await runFault('a stream client that stops reading', async () => {
        const client = openSlowReader({ apiUrl: stack.apiUrl, token: slow.token })
        const status = await client.status
        tally.add(status)
        if (status !== 200) throw new Error(`slow reader got ${status}`)
        let emitted = 0
        let probes = 0
        // Bursts of new Posts until the API lets go of the reader. The app may hold one stream, so a
        // second connection is refused (429) until the first is cut off; the deadline bounds the wait.
        try {
          await waitFor(
            'the API to cut off the slow reader',
            async () => {
              probes++
              const probe = await streamStatus(slow.token)
              tally.add(probe)
              if (probe === 200) return true
              if (probe !== 429)
                throw new Error(`unexpected ${probe} while the slow reader is open`)
              emitted += (await stack.sim<{ ids: string[] }>('POST', '/_sim/emit', { count: 300 }))
                .ids.length
              return false
            },
            { timeoutMs: knobs.faultTimeoutMs, intervalMs: 200 },
          )
        } finally {
          client.destroy()
        }
        const streamed = streamReader!.ids.size
        await waitFor('the other stream client to keep receiving', () =>
          streamReader!.ids.size > streamed ? true : false,
        )
        return `cut off after ${emitted} more Posts made (${probes} probes)`
      })

      // Final accounting over everything the upstream sent, heard or not.
      const sent = await sentIds()
      const unheard = (await stack.sim<Sent>('GET', '/_sim/sent')).unheard.length
      await settle('final')
      const lost = await missing(sent)
      const { rows } = await sql<{ rows: string; mismatched: string }>`
      SELECT (SELECT count(*) FROM posts) AS rows,
             (SELECT count(*) FROM conversations c
                WHERE c.post_count <> (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id)
             ) AS mismatched`.execute(stack.db)
      const figures = rows[0]!
      const doubled = await overCounted()
      summary.posts = {
        sent: sent.size,
        unheard,
        stored: sent.size - lost.length,
        duplicated: doubled,
        lost: lost.length,
        rows: Number(figures.rows),
        republished: await republished(),
      }
      await poller!.stop()
      await streamReader!.stop()
      summary.requests = tally.byClass()
      summary.stream = { posts: streamReader!.ids.size, connects: streamReader!.connects }
      let undelivered: string[] = []
      if (webhook) {
        const expected = await expectedEvents(sent)
        undelivered = expected.filter((id) => !webhook!.postIds.has(id))
        summary.events = {
          expected: expected.length,
          delivered: expected.length - undelivered.length,
          received: webhook.received,
          refused: webhook.refused,
        }
      }

      for (const [p, start] of startMemory) {
        if (!p.running) continue
        const end = p.memory()
        const bound = start.rss === undefined ? undefined : start.rss * knobs.rssFactor + RSS_SLACK
        summary.memory.push({ name: p.name, start, end, bound })
      }

      expect(lost, 'Posts the upstream sent that were never stored').toEqual([])
      expect(doubled, 'Posts counted in a conversation beyond its rows').toBe(0)
      for (const f of summary.faults) {
        expect(f.closeMs, `${f.name}: window closed within 60 s`).toBeLessThanOrEqual(60_000)
      }
      expect(undelivered, 'subscription events never delivered').toEqual([])
      expect(Number(figures.mismatched), 'conversations whose post_count is not count(*)').toBe(0)
      expect(tally.unexpected(), 'API answers other than 2xx, 4xx and 503').toEqual({})
      expect(tally.counts.get('200') ?? 0).toBeGreaterThan(0)
      for (const m of summary.memory) {
        if (m.bound !== undefined && m.end.rss !== undefined)
          expect(m.end.rss, `${m.name} RSS`).toBeLessThanOrEqual(m.bound)
      }
    })
  },
)

/** The delivery role runs (and its faults) once `threadline start --roles delivery` exists. */
async function deliveryExists(): Promise<boolean> {
  const { ROLES } = await import('../../packages/cli/src/index.js')
  return 'delivery' in ROLES
}
