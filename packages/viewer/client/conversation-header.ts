import { h } from './dom.js'

/** What a page of `GET /2/conversations/:id` says about the whole conversation. */
export interface TreeMeta {
  conversation_id?: string
  result_count?: number
  next_token?: string
  post_count?: number
  reply_count?: number
  reported_reply_count?: number
  missing_count?: number
  max_depth?: number
  participant_count?: number
  first_created_at?: string
  last_created_at?: string
}

export interface ConversationHeader {
  /** The heading and the coverage line, in page order. */
  elements: HTMLElement[]
  /** Shows what the conversation's meta says now. */
  paint(meta: TreeMeta): void
}

/** The conversation's heading and its coverage line: how much of it was collected. */
export function conversationHeader(conversationId: string): ConversationHeader {
  const coverage = h('p', { class: 'coverage', id: 'coverage' })
  return {
    elements: [
      h('h1', {}, 'Conversation ', h('span', { class: 'mono' }, conversationId)),
      coverage,
    ],
    paint(meta) {
      coverage.textContent = coverageParts(meta).join(' · ')
    },
  }
}

function coverageParts(meta: TreeMeta): string[] {
  const parts: string[] = []
  const stored = meta.post_count ?? 0
  if (meta.reported_reply_count !== undefined) {
    const expected = meta.reported_reply_count + 1
    const pct = expected > 0 ? Math.min(100, Math.round((stored / expected) * 100)) : 100
    parts.push(`${stored} of ${expected} Posts collected (${pct}%)`)
  } else {
    parts.push(`${stored} Posts collected; the first Post is not`)
  }
  const missing = meta.missing_count ?? 0
  parts.push(missing === 1 ? '1 parent not collected' : `${missing} parents not collected`)
  if (meta.participant_count !== undefined) parts.push(`${meta.participant_count} people`)
  if (meta.max_depth !== undefined) parts.push(`${meta.max_depth} levels deep`)
  return parts
}
