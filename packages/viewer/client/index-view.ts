import { apiPath, getJson, UnauthorizedError, type Page } from './api.js'
import { h, setStatus } from './dom.js'

/** `GET /threads`: the conversations the app follows (`GET /2/conversations`), page by page. */

interface Followed {
  id: string
  post_count?: number
  reply_count?: number
  reported_reply_count?: number
  last_created_at?: string
  backfill?: { state: string; source?: string; error?: string }
}

export function showIndex(main: HTMLElement, token: string, onUnauthorized: () => void): void {
  const body = h('tbody')
  const table = h(
    'table',
    { class: 'followed' },
    h('caption', {}, 'Conversations this app follows'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        h('th', { scope: 'col' }, 'Conversation'),
        h('th', { scope: 'col' }, 'Posts'),
        h('th', { scope: 'col' }, 'Last Post'),
        h('th', { scope: 'col' }, 'Backfill'),
      ),
    ),
    body,
  )
  const more = h('button', { type: 'button', class: 'load-more', hidden: '' }, 'More conversations')
  const empty = h(
    'p',
    { hidden: '' },
    'This app follows no conversation yet: add a ',
    h('code', {}, 'conversation_id:'),
    ' rule.',
  )
  main.replaceChildren(h('h1', {}, 'Conversations'), table, empty, more)

  let next: string | undefined
  let count = 0
  const load = async () => {
    more.disabled = true
    try {
      const page = await getJson<Page<Followed, { result_count?: number; next_token?: string }>>(
        apiPath('/2/conversations', { max_results: '100', pagination_token: next }),
        token,
      )
      for (const c of page.data ?? []) {
        count++
        const expected =
          c.reported_reply_count === undefined ? '' : ` of ${c.reported_reply_count + 1}`
        const state = c.backfill
          ? `${c.backfill.state}${c.backfill.error ? `: ${c.backfill.error}` : ''}`
          : ''
        body.append(
          h(
            'tr',
            { 'data-conversation-id': c.id },
            h('td', {}, h('a', { href: `/threads/${c.id}`, class: 'mono' }, c.id)),
            h('td', {}, `${c.post_count ?? 0}${expected}`),
            h(
              'td',
              {},
              c.last_created_at
                ? h(
                    'time',
                    { datetime: c.last_created_at },
                    new Date(c.last_created_at).toLocaleString(),
                  )
                : '—',
            ),
            h('td', {}, state),
          ),
        )
      }
      next = page.meta?.next_token
      more.hidden = next === undefined
      empty.hidden = count > 0
    } catch (err) {
      if (err instanceof UnauthorizedError) return onUnauthorized()
      setStatus(`Could not load: ${err instanceof Error ? err.message : String(err)}`)
    } finally {
      more.disabled = false
    }
  }
  more.addEventListener('click', () => void load())
  void load()
}
