import { sql } from 'kysely'
import type { Db } from '../connect.js'
import { servedUserRaw, type ReadUser } from './read-posts.js'

/**
 * Users by username, case-insensitively, in one statement: for each name the profile seen last
 * (by `observed_at`, when the upstream gave it), since a name may have passed from one user to
 * another.
 */
export async function newestUsersByUsernames(
  db: Db,
  usernames: readonly string[],
): Promise<ReadUser[]> {
  if (usernames.length === 0) return []
  const lowered = [...new Set(usernames.map((u) => u.toLowerCase()))]
  const { rows } = await sql<ReadUser>`
    SELECT DISTINCT ON (lower(username)) id::text AS id, name, username,
      ${sql.raw(servedUserRaw)} AS raw
    FROM users
    WHERE lower(username) = any(${lowered}::text[]) AND withdrawn IS NULL
    ORDER BY lower(username), observed_at DESC, id DESC`.execute(db)
  return rows
}
