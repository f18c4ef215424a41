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

/**
 * Of these ids and usernames, those of users X suspended (withdrawn, reason `suspended`): a
 * lookup names them as X does, "User has been suspended" (docs/api.md §7). Usernames lower-cased.
 */
export async function suspendedAmong(
  db: Db,
  q: { ids?: readonly string[]; usernames?: readonly string[] },
): Promise<{ ids: Set<string>; usernames: Set<string> }> {
  const ids = q.ids ?? []
  const names = (q.usernames ?? []).map((u) => u.toLowerCase())
  if (ids.length === 0 && names.length === 0) return { ids: new Set(), usernames: new Set() }
  const { rows } = await sql<{ id: string; username: string }>`
    SELECT id::text AS id, lower(username) AS username FROM users
    WHERE withdrawn = 'hidden' AND withdrawn_reason = 'suspended'
      AND (id = ANY(${ids}::bigint[]) OR lower(username) = ANY(${names}::text[]))`.execute(db)
  return {
    ids: new Set(rows.map((r) => r.id)),
    usernames: new Set(rows.map((r) => r.username)),
  }
}
