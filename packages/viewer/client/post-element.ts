import { h } from './dom.js'
import { postText, type Conversation, type Node } from './tree.js'

/** One collected Post: author, badges, time, text and public metrics. */
export function postElement(conversation: Conversation, node: Node): HTMLElement {
  const post = node.post!
  const withdrawn = post.thread?.withdrawn
  if (withdrawn) return withdrawnElement(post.id, node, withdrawn)
  const author = post.author_id === undefined ? undefined : conversation.users.get(post.author_id)
  const isOp = post.author_id !== undefined && post.author_id === conversation.rootAuthorId
  const metrics = post.public_metrics ?? {}
  return h(
    'article',
    {
      class: `post${isOp ? ' op' : ''}${node.fresh ? ' new' : ''}`,
      'data-post-id': post.id,
      'data-depth': String(node.depth),
      tabindex: '-1',
      'aria-label': `${author?.name ?? 'Unknown'}${isOp ? ', author of the thread' : ''}`,
    },
    h(
      'div',
      { class: 'head' },
      h('bdi', { class: 'name' }, author?.name ?? 'Unknown author'),
      ' ',
      h(
        'bdi',
        { class: 'handle' },
        author?.username ? `@${author.username}` : `id ${post.author_id ?? '?'}`,
      ),
      isOp
        ? h('span', { class: 'badge op-badge', title: 'Author of the first Post' }, 'author')
        : '',
      node.fresh ? h('span', { class: 'badge new-badge' }, 'new') : '',
      ' ',
      post.created_at
        ? h(
            'time',
            { datetime: post.created_at, title: post.created_at },
            formatTime(post.created_at),
          )
        : '',
    ),
    h(
      'p',
      { class: 'text', dir: 'auto', ...(post.lang ? { lang: post.lang } : {}) },
      postText(post.text),
    ),
    h(
      'p',
      { class: 'metrics' },
      metric(metrics.reply_count, 'reply', 'replies'),
      metric(metrics.retweet_count, 'repost', 'reposts'),
      metric(metrics.like_count, 'like', 'likes'),
      metric(metrics.quote_count, 'quote', 'quotes'),
    ),
  )
}

const WITHDRAWN_TEXT = {
  deleted: 'This Post was deleted.',
  unavailable: 'This Post is unavailable.',
} as const

/** A Post X withdrew: its place in the tree and nothing of its content; its replies stay below. */
function withdrawnElement(
  id: string,
  node: Node,
  withdrawn: keyof typeof WITHDRAWN_TEXT,
): HTMLElement {
  return h(
    'article',
    {
      class: `post withdrawn${node.fresh ? ' new' : ''}`,
      'data-post-id': id,
      'data-depth': String(node.depth),
      'data-withdrawn': withdrawn,
      tabindex: '-1',
      'aria-label': WITHDRAWN_TEXT[withdrawn],
    },
    // A head like a Post's: the tree puts its collapse toggle there.
    h('div', { class: 'head' }, h('span', { class: 'withdrawn-text' }, WITHDRAWN_TEXT[withdrawn])),
  )
}

/** A parent the tree knows of but did not collect; it keeps its replies below it. */
export function placeholderElement(conversationId: string, node: Node): HTMLElement {
  return h(
    'section',
    {
      class: 'missing',
      'data-missing-id': node.id,
      tabindex: '-1',
      'aria-label': 'Parent not collected',
    },
    h(
      'div',
      { class: 'head' },
      h(
        'span',
        { class: 'missing-label' },
        node.id === conversationId ? 'First Post not collected' : 'Parent not collected',
      ),
      ' ',
      h('span', { class: 'mono' }, node.id),
    ),
  )
}

function metric(value: number | undefined, one: string, many: string): HTMLElement | string {
  if (value === undefined) return ''
  return h('span', { class: 'metric' }, `${value.toLocaleString()} ${value === 1 ? one : many}`)
}

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })

function formatTime(iso: string): string {
  const date = new Date(iso)
  return Number.isNaN(date.getTime()) ? iso : timeFormat.format(date)
}
