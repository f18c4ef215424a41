import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { sql } from 'kysely'
import { createTestEnv, HEAVY_TEST_MS, testSize, type TestEnv } from '@threadline/testing'
import {
  formatPostTime,
  normalizeLines,
  snowflakeTime,
  type ComplianceEvent,
} from '@threadline/domain'
import { storeBatch } from './store-batch.js'
import { applyComplianceEvents } from './compliance.js'

// Events win over content by event_at (docs/api.md §7): whatever order events and copies of one
// Post arrive in, and however often, the Post ends in the state of its latest event.

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

type Step =
  | { kind: 'event'; action: 'delete' | 'drop' | 'undrop'; minute: number }
  | { kind: 'author'; action: 'user_protect' | 'user_unprotect'; minute: number }
  | { kind: 'copy'; version: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('event' as const),
    action: fc.constantFrom('delete' as const, 'drop' as const, 'undrop' as const),
    minute: fc.integer({ min: 0, max: 59 }),
  }),
  fc.record({
    kind: fc.constant('author' as const),
    action: fc.constantFrom('user_protect' as const, 'user_unprotect' as const),
    minute: fc.integer({ min: 0, max: 59 }),
  }),
  fc.record({ kind: fc.constant('copy' as const), version: fc.integer({ min: 1, max: 9 }) }),
)

let next = 0n
/** A fresh snowflake id of a recent time per run, so that runs do not meet. */
function freshId(): string {
  next += 1n
  return (((BigInt(Date.now() - 3_600_000) - 1288834974657n) << 22n) + next).toString()
}

function copyLine(id: string, author: string, version: number): string {
  return JSON.stringify({
    data: {
      id,
      text: `copy ${version} of ${id}`,
      author_id: author,
      conversation_id: id,
      created_at: formatPostTime(snowflakeTime(id)!),
    },
  })
}

/**
 * What the steps must leave: deleted once any delete came; else hidden when the latest drop/undrop
 * is a drop, or when the author's latest protect/unprotect is a protect and the Post is stored (the
 * author's state alone leaves no row for a Post never stored).
 */
function expected(steps: readonly Step[]) {
  const events = steps.flatMap((s) => (s.kind === 'event' ? [s] : []))
  const copies = steps.flatMap((s) => (s.kind === 'copy' ? [s.version] : []))
  const content = copies.length > 0 ? Math.max(...copies) : undefined
  if (events.some((e) => e.action === 'delete')) return { withdrawn: 'deleted', content: undefined }
  const latest = <T extends { minute: number }>(list: readonly T[]) =>
    list.reduce<T | undefined>((a, e) => (!a || e.minute >= a.minute ? e : a), undefined)
  const dropped = latest(events)?.action === 'drop'
  const authorSteps = steps.flatMap((s) => (s.kind === 'author' ? [s] : []))
  const protectedAuthor = latest(authorSteps)?.action === 'user_protect'
  if (dropped || (protectedAuthor && content !== undefined)) return { withdrawn: 'hidden', content }
  return { withdrawn: null, content }
}

describe('compliance events and content in any order', () => {
  it('end in the state of the latest event', { timeout: HEAVY_TEST_MS }, async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(step, { minLength: 1, maxLength: 7 }).filter((steps) => {
          // One event per (action, minute): X's event_at identifies an event.
          const keys = steps.flatMap((s) => (s.kind !== 'copy' ? [`${s.action}${s.minute}`] : []))
          // Same-minute drop and undrop (protect and unprotect) have no order upstream either.
          const minutes = (kind: Step['kind']) =>
            steps.flatMap((s) =>
              s.kind === kind && s.kind !== 'copy' && s.action !== 'delete' ? [s.minute] : [],
            )
          const distinct = (list: number[]) => new Set(list).size === list.length
          return (
            new Set(keys).size === keys.length &&
            distinct(minutes('event')) &&
            distinct(minutes('author'))
          )
        }),
        fc.boolean(),
        async (steps, twice) => {
          const id = freshId()
          const author = String(BigInt(id) % 1_000_000_007n)
          const all = twice ? [...steps, ...steps] : steps
          for (const s of all) {
            if (s.kind === 'copy') {
              // A later version is a later observation.
              const observed = new Date(Date.UTC(2026, 10, 28, 12, s.version)).toISOString()
              const line = copyLine(id, author, s.version)
              await storeBatch(env.db, normalizeLines([line], observed), 't')
            } else if (s.kind === 'author') {
              const at = new Date(Date.UTC(2026, 10, 28, 10, s.minute)).toISOString()
              await applyComplianceEvents(env.db, [
                {
                  kind: 'user',
                  id: author,
                  action: s.action,
                  eventAt: at,
                  receivedAt: at,
                  source: 'stream',
                },
              ])
            } else {
              const e: ComplianceEvent = {
                kind: 'tweet',
                id,
                action: s.action,
                eventAt: new Date(Date.UTC(2026, 10, 28, 10, s.minute)).toISOString(),
                receivedAt: new Date().toISOString(),
                source: 'stream',
              }
              await applyComplianceEvents(env.db, [e])
            }
          }
          const { rows } = await sql<{ text: string; withdrawn: string | null }>`
              SELECT text, withdrawn FROM posts WHERE id = ${id}`.execute(env.db)
          const want = expected(steps)
          if (want.withdrawn === 'deleted') {
            expect(rows).toEqual([{ text: '', withdrawn: 'deleted' }])
          } else if (want.content === undefined) {
            // Never stored: a hidden placeholder, or nothing at all.
            expect(rows).toEqual(want.withdrawn ? [{ text: '', withdrawn: 'hidden' }] : [])
          } else {
            expect(rows).toEqual([
              { text: `copy ${want.content} of ${id}`, withdrawn: want.withdrawn },
            ])
          }
        },
      ),
      { numRuns: testSize(40, 400) },
    )
  })
})
