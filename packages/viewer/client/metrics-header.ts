import { apiPath, getJson, UnauthorizedError } from './api.js'
import { h } from './dom.js'

/** The members of `GET /2/conversations/:id/metrics` the header shows (docs/api.md §5.5). */
interface Metrics {
  post_count: number
  author_count: number
  depth: number
  max_breadth: number
  structural_virality: number
  h_index: number
  first_reply_seconds?: number
  median_reply_gap_seconds?: number
}

/** A duration in the largest unit that keeps it readable. */
function duration(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)} s`
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`
  if (seconds < 172_800) return `${Math.round(seconds / 3600)} h`
  return `${Math.round(seconds / 86_400)} days`
}

/**
 * The conversation's metrics as a line of terms for the header: an element that fills in once
 * they are read (it stays empty if they cannot be).
 */
export function metricsHeader(
  conversationId: string,
  token: string,
  onUnauthorized: () => void,
): HTMLElement {
  const list = h('dl', { class: 'metrics', id: 'metrics', 'aria-label': 'Metrics' })
  const term = (name: string, value: string, title: string) =>
    list.append(h('div', { title }, h('dt', {}, name), h('dd', {}, value)))
  getJson<{ data?: Metrics }>(
    apiPath(`/2/conversations/${conversationId}/metrics`, {}),
    token,
  ).then(
    ({ data }) => {
      if (!data) return
      term('Depth', String(data.depth), 'Largest depth of a reply')
      term('Breadth', String(data.max_breadth), 'Most Posts at one depth')
      term(
        'Virality',
        data.structural_virality.toFixed(2),
        'Structural virality: mean distance between two Posts of the tree',
      )
      term('h-index', String(data.h_index), 'At least h Posts sit at depth h or deeper')
      if (data.first_reply_seconds !== undefined) {
        term('First reply', duration(data.first_reply_seconds), 'After the first Post')
      }
      if (data.median_reply_gap_seconds !== undefined) {
        term('Reply gap', duration(data.median_reply_gap_seconds), 'Median time between replies')
      }
    },
    (err: unknown) => {
      if (err instanceof UnauthorizedError) onUnauthorized()
    },
  )
  return list
}
