import type { SkeletonRows } from './conversation-skeleton.js'
import { buildConversationTree } from './conversation-tree.js'

/**
 * What a conversation measures (docs/api.md §5.5), over its stored tree as the tree route builds
 * it: orphans hang under the root, withdrawn Posts count for the structure. Pure: the caller reads
 * the skeleton (readConversationSkeleton in @threadline/db).
 */
export interface ConversationMetrics {
  post_count: number
  reply_count: number
  author_count: number
  /** Replies by the root's author ÷ replies (0 when none); absent without a stored root. */
  root_author_reply_share?: number
  depth: number
  max_breadth: number
  structural_virality: number
  h_index: number
  first_reply_seconds?: number
  median_reply_gap_seconds?: number
  first_post_at?: string
  last_post_at?: string
  missing_parent_count: number
  /** Stored replies ÷ the root's reported reply_count; absent without a root that reports one. */
  coverage?: number
  growth?: GrowthBucket[]
}

export const METRICS_GRANULARITIES = ['minute', 'hour', 'day'] as const
export type MetricsGranularity = (typeof METRICS_GRANULARITIES)[number]

export interface GrowthBucket {
  start: string
  end: string
  tweet_count: number
  total: number
}

/** The members of ConversationMetrics a table holds, in its column order (`growth` aside). */
export const METRICS_COLUMNS = [
  'post_count',
  'reply_count',
  'author_count',
  'root_author_reply_share',
  'depth',
  'max_breadth',
  'structural_virality',
  'h_index',
  'first_reply_seconds',
  'median_reply_gap_seconds',
  'first_post_at',
  'last_post_at',
  'missing_parent_count',
  'coverage',
] as const satisfies ReadonlyArray<keyof ConversationMetrics>

/**
 * The shape of a tree: for each node its depth and its subtree size, nodes in any order with the
 * root (depth 0) counted once. Without a stored root, a virtual one stands above the orphans.
 */
export interface TreeShape {
  /** Nodes, the (virtual) root included. */
  n: number
  depths: Int32Array
  subtreeSizes: Int32Array
}

/**
 * The Wiener index (sum of distances over all pairs) of a tree in O(n): each edge above a subtree
 * of s nodes lies on the path of exactly s·(n−s) pairs.
 */
export function wienerIndex(shape: TreeShape): number {
  let w = 0
  for (let i = 0; i < shape.n; i++) {
    if (shape.depths[i] === 0) continue
    const s = shape.subtreeSizes[i]!
    w += s * (shape.n - s)
  }
  return w
}

/** Mean distance over all pairs, 2W / (n(n−1)) (Goel et al. 2016); 0 for one node. */
export function structuralVirality(shape: TreeShape): number {
  const n = shape.n
  return n < 2 ? 0 : (2 * wienerIndex(shape)) / (n * (n - 1))
}

/** The largest h such that at least h nodes sit at depth ≥ h. */
export function hIndex(depths: ArrayLike<number>): number {
  let max = 0
  for (let i = 0; i < depths.length; i++) if (depths[i]! > max) max = depths[i]!
  const atLeast = new Int32Array(max + 2)
  for (let i = 0; i < depths.length; i++) atLeast[depths[i]!]!++
  for (let d = max - 1; d >= 0; d--) atLeast[d]! += atLeast[d + 1]!
  for (let h = max; h > 0; h--) if (atLeast[h]! >= h) return h
  return 0
}

const median = (sorted: readonly number[]): number => {
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The shape of the stored tree of a conversation (see TreeShape), and the tree's facts. */
export function conversationShape(conversationId: string, rows: SkeletonRows) {
  const tree = buildConversationTree(conversationId, rows, 'oldest')
  const virtual = !tree.rootStored && tree.size > 0 ? 1 : 0
  const n = tree.size + virtual
  const depths = new Int32Array(n)
  const subtreeSizes = new Int32Array(n)
  let missingParents = 0
  for (let p = 0; p < tree.size; p++) {
    const thread = tree.threadAt(p)
    depths[p] = thread.depth
    subtreeSizes[p] = thread.descendant_count + 1
    if (thread.missing_parent) missingParents++
  }
  if (virtual) subtreeSizes[tree.size] = n
  return { tree, shape: { n, depths, subtreeSizes }, missingParents }
}

/** Growth buckets (UTC-aligned, contiguous) from `fromMs` to the last Post. */
export function growthBuckets(
  createdMs: ArrayLike<number>,
  fromMs: number,
  granularity: MetricsGranularity,
): GrowthBucket[] {
  const step = granularity === 'minute' ? 60_000 : granularity === 'hour' ? 3_600_000 : 86_400_000
  let last = fromMs
  for (let i = 0; i < createdMs.length; i++) if (createdMs[i]! > last) last = createdMs[i]!
  const first = Math.floor(fromMs / step) * step
  const counts = new Array<number>(Math.floor((last - first) / step) + 1).fill(0)
  for (let i = 0; i < createdMs.length; i++) {
    // A Post dated before the root (clock skew upstream) counts in the first bucket.
    counts[Math.max(0, Math.floor((createdMs[i]! - first) / step))]!++
  }
  let total = 0
  return counts.map((tweet_count, b) => {
    total += tweet_count
    return {
      start: new Date(first + b * step).toISOString(),
      end: new Date(first + (b + 1) * step).toISOString(),
      tweet_count,
      total,
    }
  })
}

/** Buckets growth may have: past this the caller asks for a coarser granularity. */
export const MAX_GROWTH_BUCKETS = 100_000

/** How many buckets growthBuckets would make. */
export function growthBucketCount(
  createdMs: ArrayLike<number>,
  fromMs: number,
  granularity: MetricsGranularity,
): number {
  const step = granularity === 'minute' ? 60_000 : granularity === 'hour' ? 3_600_000 : 86_400_000
  let last = fromMs
  for (let i = 0; i < createdMs.length; i++) if (createdMs[i]! > last) last = createdMs[i]!
  return Math.floor(last / step) - Math.floor(fromMs / step) + 1
}

/**
 * Every member of ConversationMetrics for one conversation's stored rows; undefined when nothing
 * is stored. `reportedReplyCount` is the root's `public_metrics.reply_count` as last seen.
 */
export function conversationMetrics(
  conversationId: string,
  rows: SkeletonRows,
  reportedReplyCount: number | undefined,
  granularity?: MetricsGranularity,
): ConversationMetrics | undefined {
  const { tree, shape, missingParents } = conversationShape(conversationId, rows)
  if (tree.size === 0) return undefined
  const rootRow = rows.ids.indexOf(conversationId)
  const rootAuthor = rootRow >= 0 ? rows.authors[rootRow] : undefined
  const rootMs = rootRow >= 0 ? rows.createdMs[rootRow] : undefined

  const replyMs: number[] = []
  let byRootAuthor = 0
  for (let r = 0; r < rows.ids.length; r++) {
    if (r === rootRow || rows.parents[r] == null) continue
    replyMs.push(rows.createdMs[r]!)
    if (rootAuthor != null && rows.authors[r] === rootAuthor) byRootAuthor++
  }
  replyMs.sort((a, b) => a - b)
  const gaps: number[] = []
  for (let i = 1; i < replyMs.length; i++) gaps.push(replyMs[i]! - replyMs[i - 1]!)
  gaps.sort((a, b) => a - b)

  const breadth = new Int32Array(tree.meta.max_depth + 1)
  for (let p = 0; p < tree.size; p++) breadth[shape.depths[p]!]!++
  let maxBreadth = 0
  for (const b of breadth) if (b > maxBreadth) maxBreadth = b

  const meta = tree.meta
  const metrics: ConversationMetrics = {
    post_count: meta.post_count,
    reply_count: meta.reply_count,
    author_count: meta.participant_count,
    ...(rootRow >= 0
      ? { root_author_reply_share: replyMs.length === 0 ? 0 : byRootAuthor / replyMs.length }
      : {}),
    depth: meta.max_depth,
    max_breadth: maxBreadth,
    structural_virality: structuralVirality(shape),
    h_index: hIndex(shape.depths.subarray(0, tree.size)),
    ...(rootMs !== undefined && replyMs.length > 0
      ? { first_reply_seconds: (replyMs[0]! - rootMs) / 1000 }
      : {}),
    ...(gaps.length > 0 ? { median_reply_gap_seconds: median(gaps) / 1000 } : {}),
    first_post_at: meta.first_created_at,
    last_post_at: meta.last_created_at,
    missing_parent_count: missingParents,
    ...(reportedReplyCount !== undefined && reportedReplyCount > 0 && rootRow >= 0
      ? { coverage: meta.reply_count / reportedReplyCount }
      : {}),
  }
  if (granularity) {
    const from = rootMs ?? Date.parse(meta.first_created_at!)
    metrics.growth = growthBuckets(rows.createdMs, from, granularity)
  }
  return metrics
}

/** A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
const csvField = (value: unknown): string => {
  if (value === undefined || value === null) return ''
  const text = String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

/** The header of a metrics table: `conversation_id` then METRICS_COLUMNS. */
export const METRICS_CSV_HEADER = ['conversation_id', ...METRICS_COLUMNS].join(',') + '\r\n'

/** One conversation's row of a metrics table (empty cells for absent members). */
export function metricsCsvRow(conversationId: string, metrics: ConversationMetrics | undefined) {
  const cells = METRICS_COLUMNS.map((c) => csvField(metrics?.[c]))
  return [conversationId, ...cells].join(',') + '\r\n'
}
