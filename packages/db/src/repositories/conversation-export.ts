import type { ExportRow } from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'

/** A Post's place in its conversation's tree, as the tree pages give it. */
export interface ExportPlace {
  id: string
  depth: number
  parent_id?: string
  missing_parent?: boolean
  reply_count: number
  descendant_count: number
}

type Row = {
  id: string
  conversation_id: string | null
  author_id: string | null
  username: string | null
  created_at: string
  text: string
  lang: string | null
  reply_count: number | null
  like_count: number | null
  retweet_count: number | null
  quote_count: number | null
  quoted_id: string | null
  post?: string
  author?: string | null
  refs?: string[] | null
  withdrawn: 'deleted' | 'unavailable' | null
}

// A withdrawn author's name is not exported (docs/api.md §7); a withdrawn Post's content is
// dropped below.
const COLUMNS = `p.id::text AS id, p.conversation_id::text AS conversation_id,
  p.author_id::text AS author_id, CASE WHEN u.withdrawn IS NULL THEN u.username END AS username,
  to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS created_at,
  p.text, p.lang, p.reply_count, p.like_count, p.retweet_count, p.quote_count,
  CASE p.withdrawn WHEN 'deleted' THEN 'deleted' WHEN 'hidden' THEN 'unavailable' END AS withdrawn`

/** The page's rows, by id (order comes from the tree). */
const ROWS = `SELECT ${COLUMNS},
    (SELECT r.referenced_id::text FROM post_references r
      WHERE r.post_id = p.id AND r.type = 'quoted' LIMIT 1) AS quoted_id
  FROM posts p LEFT JOIN users u ON u.id = p.author_id
  WHERE p.id = ANY($1::bigint[])`

/**
 * The same, with the Post and its author as stored (JSON text) and the ids of every Post it
 * references: the parent, then quotes and retweets (post_references holds only those).
 */
const ROWS_WITH_JSON = `SELECT ${COLUMNS}, r.quoted_id, p.raw::text AS post,
    CASE WHEN u.withdrawn IS NULL THEN u.raw::text END AS author,
    array_remove(p.in_reply_to_post_id::text || r.refs, NULL) AS refs
  FROM posts p LEFT JOIN users u ON u.id = p.author_id
  LEFT JOIN LATERAL (
    SELECT (array_agg(referenced_id::text) FILTER (WHERE type = 'quoted'))[1] AS quoted_id,
      array_agg(referenced_id::text) AS refs
    FROM post_references WHERE post_id = p.id) r ON true
  WHERE p.id = ANY($1::bigint[])`

const JSON_BY_IDS = `SELECT id::text AS id, raw::text AS post FROM posts
  WHERE id = ANY($1::bigint[]) AND withdrawn IS NULL`

/**
 * The export rows of one page of a conversation's tree (docs/api.md §5), in the page's order, in
 * one statement. With `json`, each row carries the Post and its author as stored and the ids of
 * the Posts it references (`json.refs`; `json.referenced` is left for the caller to fill, see
 * readPostsJson). A Post deleted since the tree was read is left out; one X withdrew keeps its
 * place with `withdrawn` and nothing else of its own (docs/api.md §7).
 */
export async function readExportRows(
  db: Db,
  places: readonly ExportPlace[],
  { json }: { json: boolean },
): Promise<ExportRow[]> {
  if (places.length === 0) return []
  const ids = places.map((p) => p.id)
  const rows = await queryRows<Row>(db, json ? ROWS_WITH_JSON : ROWS, [ids], { prepare: true })
  const byId = new Map(rows.map((r) => [r.id, r]))
  return places.flatMap((place) => {
    const r = byId.get(place.id)
    return r ? [exportRow(place, r, json)] : []
  })
}

/** What a Post X withdrew shows of its own: its id, conversation and time, no content. */
const NO_CONTENT = {
  author_id: null,
  username: null,
  text: '',
  lang: null,
  reply_count: null,
  like_count: null,
  retweet_count: null,
  quote_count: null,
  quoted_id: null,
} as const satisfies Partial<Row>

/** One Post's export row at its place in the tree. */
function exportRow(place: ExportPlace, r: Row, json: boolean): ExportRow {
  const content = r.withdrawn === null ? r : NO_CONTENT
  const row: ExportRow = {
    id: r.id,
    depth: place.depth,
    stored_reply_count: place.reply_count,
    descendant_count: place.descendant_count,
    conversation_id: r.conversation_id,
    author_id: content.author_id,
    author_username: content.username,
    created_at: r.created_at,
    text: content.text,
    lang: content.lang,
    reply_count: content.reply_count,
    like_count: content.like_count,
    retweet_count: content.retweet_count,
    quote_count: content.quote_count,
    quoted_id: content.quoted_id,
  }
  if (r.withdrawn !== null) row.withdrawn = r.withdrawn
  if (place.parent_id !== undefined) row.parent_id = place.parent_id
  if (place.missing_parent) row.missing_parent = true
  if (json && r.withdrawn === null) {
    row.json = { post: r.post!, refs: [...new Set(r.refs ?? [])], referenced: [] }
    if (r.author != null) row.json.author = r.author
  }
  return row
}

/** Posts as stored (JSON text) by id, in one statement; ids not stored or withdrawn are absent. */
export async function readPostsJson(db: Db, ids: readonly string[]): Promise<Map<string, string>> {
  if (ids.length === 0) return new Map()
  const rows = await queryRows<{ id: string; post: string }>(db, JSON_BY_IDS, [ids], {
    prepare: true,
  })
  return new Map(rows.map((r) => [r.id, r.post]))
}
