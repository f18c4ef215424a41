import type { OutboxPayload } from '@threadline/db'
import type { NormalizedBatch } from '@threadline/domain'
import type { StoredEntry } from '@threadline/redis'

/** A Post's `stored` entry: the Post with its author, as the stream hub reads it. */
export function postEntry(id: string, post: unknown, author: unknown): StoredEntry {
  const body = author ? { data: post, author } : { data: post }
  return { type: 'post', id, body: JSON.stringify(body) }
}

/** Stream entries for the user changes of outbox rows. */
export function userChangeEntries(payloads: readonly OutboxPayload[]): StoredEntry[] {
  return payloads.flatMap((payload) =>
    payload.user_changes.map((change): StoredEntry => ({
      type: 'user_change',
      id: change.id,
      body: JSON.stringify(change),
    })),
  )
}

/** Each Post's `stored` entry, by id, with its author from the same batch. */
export function postEntries(batch: NormalizedBatch): Map<string, StoredEntry> {
  const users = new Map(batch.users.map((u) => [u.id, u.raw]))
  const entries = new Map<string, StoredEntry>()
  for (const p of batch.posts) {
    entries.set(p.id, postEntry(p.id, p.raw, p.author_id ? users.get(p.author_id) : undefined))
  }
  return entries
}
