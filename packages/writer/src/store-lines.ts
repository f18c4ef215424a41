import {
  isDataError,
  storeBatch,
  type Db,
  type OutboxPayload,
  type StoreResult,
} from '@threadline/db'
import { normalizeLines } from '@threadline/domain'
import type { StoredEntry } from '@threadline/redis'
import type { RecentlyStored, SentRows } from './recent.js'
import { postEntries, userChangeEntries } from './stored-entries.js'

/** An outbox row a call wrote, with its stream entries, ready to publish after commit. */
export interface FreshOutbox {
  id: string
  payload: OutboxPayload
  entries: StoredEntry[]
}

export interface StoredLines extends Omit<StoreResult, 'outbox'> {
  fresh: FreshOutbox[]
}

export interface StoreLinesOptions {
  /** What this process stored lately: copies the statement would skip are not sent. */
  recent?: RecentlyStored
  /** The `posts` job's id: a job retried after its batch committed keeps no reject twice. */
  batchId?: string
}

/**
 * Normalizes lines and sends them to Postgres, less the copies `recent` says the statement would
 * skip. Of the batch, only text and small records are kept while the statement runs (its
 * parameters, each Post's stream entry, what `recent` remembers after commit): a batch waits on
 * Postgres for most of its life, and its parsed objects held across that wait would be copied by
 * every young-generation GC.
 */
function startStore(
  db: Db,
  lines: readonly string[],
  observedAt: string,
  source: string,
  { recent, batchId }: StoreLinesOptions,
) {
  const observedMs = Date.parse(observedAt)
  const skipIncluded = recent && ((id: string) => recent.storedPost(id, observedMs))
  const normalized = normalizeLines(lines, observedAt, { skipIncluded })
  const batch = recent ? recent.skipKnown(normalized) : normalized
  const sent: SentRows = {
    posts: batch.posts.map((p) => ({ id: p.id, observed_at: p.observed_at })),
    users: batch.users.map(({ id, observed_at, name, username }) => ({
      id,
      observed_at,
      name,
      username,
    })),
  }
  // Entries from the whole batch: a Post's author travels with it even when its row is not resent.
  return {
    entries: postEntries(normalized),
    sent,
    stored: storeBatch(db, batch, source, batchId),
  }
}

/**
 * Normalizes a batch's lines and stores them in one transaction. If Postgres refuses some row as
 * data (a value out of range, say), splits the lines in halves until the offending lines are
 * alone, and keeps each of those in ingest_rejects with Postgres's reason; the rest is stored.
 * Transient errors propagate, so BullMQ retries the whole job with backoff. Returns what was newly
 * stored, for publishing after commit.
 */
export async function storeLines(
  db: Db,
  lines: readonly string[],
  observedAt: string,
  source: string,
  options: StoreLinesOptions = {},
): Promise<StoredLines> {
  const { entries, sent, stored } = startStore(db, lines, observedAt, source, options)
  try {
    const { outbox, ...result } = await stored
    options.recent?.remember(sent)
    const fresh = outbox.map(({ id, payload }) => ({
      id,
      payload,
      entries: [
        ...payload.post_ids.flatMap((postId) => entries.get(postId) ?? []),
        ...userChangeEntries([payload]),
      ],
    }))
    return { ...result, fresh }
  } catch (err) {
    if (!isDataError(err)) throw err
    if (lines.length === 1) {
      const reason = `refused by Postgres: ${(err as Error).message}`
      const raw = lines[0]!.replaceAll('\u0000', '\\u0000')
      const rejected = { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }
      const { outbox: _none, ...result } = await storeBatch(db, rejected, source, options.batchId)
      return { ...result, fresh: [] }
    }
    const mid = Math.ceil(lines.length / 2)
    const a = await storeLines(db, lines.slice(0, mid), observedAt, source, options)
    const b = await storeLines(db, lines.slice(mid), observedAt, source, options)
    return {
      inserted: a.inserted + b.inserted,
      updated: a.updated + b.updated,
      users: a.users + b.users,
      rejects: a.rejects + b.rejects,
      fresh: [...a.fresh, ...b.fresh],
    }
  }
}
