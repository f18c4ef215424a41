import { pipeline } from 'node:stream/promises'
import { Readable } from 'node:stream'
import pg from 'pg'
import copyStreams from 'pg-copy-streams'
import { normalizeLines } from '@threadline/domain'

export const COLUMNS = [
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
  'search_terms',
  'raw',
  'observed_at',
] as const

/** A text[] literal: each element quoted, its quotes and backslashes escaped. */
function arrayLiteral(items: readonly string[]): string {
  return `{${items.map((t) => `"${t.replace(/["\\]/g, '\\$&')}"`).join(',')}}`
}

/** COPY text format: backslash, tab, newline and carriage return escaped; NULL is \N. */
export function field(value: unknown, column: string): string {
  if (value === null || value === undefined) return '\\N'
  const s =
    column === 'search_terms'
      ? arrayLiteral(value as string[])
      : typeof value === 'string'
        ? value
        : JSON.stringify(value)
  return s.replace(/\\/g, '\\\\').replace(/\t/g, '\\t').replace(/\n/g, '\\n').replace(/\r/g, '\\r')
}

/**
 * The baseline the ingest benchmarks compare against: the same Posts COPYed into a bare table
 * identical to `posts` (same columns, same indexes), on one connection. The rows hold what the
 * writer stores, search terms included: without them the GIN index has nothing to do, and the
 * baseline would not be the same Posts. Rows are prepared before the
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
        COLUMNS.map((c) => field((p as unknown as Record<string, unknown>)[c], c)).join('\t'),
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
    // The terms went in as the writer's rows hold them (a wrong literal would load as other terms).
    const { rows } = await client.query<{ n: string }>(
      'SELECT sum(cardinality(search_terms))::text AS n FROM copy_posts',
    )
    const terms = batch.posts.reduce((n, p) => n + p.search_terms.length, 0)
    if (Number(rows[0]!.n ?? 0) !== terms) {
      throw new Error(`COPY baseline loaded ${rows[0]!.n} search terms, not ${terms}`)
    }
    await client.query('DROP TABLE copy_posts')
    return { rows: batch.posts.length, seconds, rate: batch.posts.length / seconds }
  } finally {
    await client.end()
  }
}
