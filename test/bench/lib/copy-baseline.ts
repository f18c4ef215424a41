import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import pg from 'pg'
import copyStreams from 'pg-copy-streams'
import { normalizeLines } from '@threadline/domain'

const COLUMNS = [
  'id',
  'conversation_id',
  'author_id',
  'in_reply_to_user_id',
  'in_reply_to_post_id',
  'text',
  'created_at',
  'lang',
  'retweet_count',
  'reply_count',
  'like_count',
  'quote_count',
  'bookmark_count',
  'impression_count',
  'raw',
  'observed_at',
] as const

/** COPY text format: backslash, tab, newline and carriage return escaped; NULL is \N. */
function field(value: unknown): string {
  if (value === null || value === undefined) return '\\N'
  const s = typeof value === 'string' ? value : JSON.stringify(value)
  return s.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r')
}

/**
 * The baseline the ingest benchmarks compare against: the same Posts COPYed into a bare table
 * identical to `posts` (same columns, same indexes), on one connection. Rows are prepared before the
 * clock starts: this measures what Postgres can load, the ceiling for any writer.
 */
export async function copyBaseline(
  databaseUrl: string,
  lines: readonly string[],
): Promise<{ rows: number; seconds: number; rate: number }> {
  const batch = normalizeLines(lines, new Date().toISOString())
  const text =
    batch.posts
      .map((p) =>
        COLUMNS.map((c) => field((p as unknown as Record<string, unknown>)[c])).join('\t'),
      )
      .join('\n') + '\n'
  const client = new pg.Client({ connectionString: databaseUrl })
  await client.connect()
  try {
    await client.query('DROP TABLE IF EXISTS copy_posts')
    await client.query('CREATE TABLE copy_posts (LIKE posts INCLUDING ALL)')
    const started = performance.now()
    const stream = client.query(
      copyStreams.from(`COPY copy_posts (${COLUMNS.join(', ')}) FROM STDIN`),
    )
    await pipeline(Readable.from([text]), stream)
    const seconds = (performance.now() - started) / 1000
    await client.query('DROP TABLE copy_posts')
    return { rows: batch.posts.length, seconds, rate: batch.posts.length / seconds }
  } finally {
    await client.end()
  }
}
