import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createApp,
  createDb,
  createWebhook,
  queueWebhookEvents,
  sql,
  type Db,
} from '@threadline/db'
import { generateId } from '@threadline/domain'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { startTestDelivery } from '../../../test/support/delivery.js'
import type { Delivery } from './delivery.js'

/**
 * The webhook sender against a held lock on its webhook's row: the activity side locks that row
 * (next_seq) in every transaction that queues events for it, so a sender that wrote to the row
 * for every event would stall behind each of those transactions.
 */
let env: TestEnv
let delivery: Delivery
let receiverUrl: string
const received: string[] = []
/** Responses held back until released (to pin the sender mid-page). */
const held: Array<() => void> = []
let holdNext = 0

beforeAll(async () => {
  env = await createTestEnv({ WEBHOOK_ALLOW_PRIVATE: 'true' })
  const receiver = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      received.push(Buffer.concat(chunks).toString('utf8'))
      const answer = () => res.writeHead(200).end()
      if (holdNext > 0) {
        holdNext -= 1
        held.push(answer)
      } else answer()
    })
  })
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r))
  env.defer(() => {
    for (const answer of held.splice(0)) answer()
    return new Promise((r) => receiver.close(r))
  })
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
  delivery = await startTestDelivery(env)
})
afterAll(() => env?.close())

/** Runs `fn` while another connection holds the webhook's row locked, as an open append does. */
async function whileRowLocked(db: Db, webhookId: string, fn: () => Promise<void>): Promise<void> {
  let locked!: () => void
  const isLocked = new Promise<void>((r) => (locked = r))
  let release!: () => void
  const released = new Promise<void>((r) => (release = r))
  const tx = db.transaction().execute(async (trx) => {
    await sql`UPDATE webhooks SET next_seq = next_seq WHERE id = ${webhookId}`.execute(trx)
    locked()
    await released
  })
  try {
    await isLocked
    await fn()
  } finally {
    release()
    await tx
  }
}

describe('webhook sender', () => {
  it('keeps sending queued events while an activity transaction holds the webhook row', async () => {
    const app = await createApp(env.db, 'lock')
    const hook = (await createWebhook(env.db, app.app_id, `${receiverUrl}/hook`, { cap: 10 }))!
    const events = [1, 2, 3].map((n) => ({
      webhook_id: hook.id,
      event_uuid: generateId(),
      app_id: app.app_id,
      subscription_id: '1',
      event_type: 'post.create',
      body: JSON.stringify({ data: { n } }),
    }))
    await queueWebhookEvents(env.db, events)
    // The first POST is held: the sender has claimed the webhook and read the page.
    holdNext = 1
    await delivery.sweep()
    await waitFor('the first event at the receiver', () => held.length === 1)
    const locker = createDb({ url: env.databaseUrl, poolMax: 1 })
    env.defer(() => locker.destroy())
    await whileRowLocked(locker, hook.id, async () => {
      held.shift()!()
      await waitFor('the rest sent while the row is locked', () => received.length === 3, {
        timeoutMs: 5_000,
      })
    })
    expect(received.map((b) => (JSON.parse(b) as { data: { n: number } }).data.n)).toEqual([
      1, 2, 3,
    ])
    await waitFor('the queue empty', async () => {
      const left = await env.db
        .selectFrom('webhook_deliveries')
        .select('seq')
        .where('webhook_id', '=', hook.id)
        .execute()
      return left.length === 0
    })
  })
})
