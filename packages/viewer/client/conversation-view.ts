import {
  apiPath,
  followStream,
  getJson,
  POST_FIELDS,
  UnauthorizedError,
  USER_FIELDS,
  type Page,
  type Post,
} from './api.js'
import { h, keepViewport, setStatus } from './dom.js'
import { metricsHeader } from './metrics-header.js'
import { Conversation, postText, type Node, type Sort } from './tree.js'

/**
 * The page of one conversation (docs/api.md §6): an indented tree read page by page from
 * `GET /2/conversations/:id`, kept current by `GET /2/conversations/:id/stream`.
 */

interface TreeMeta {
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

/**
 * Levels indented below the anchor before a branch continues on a view of its own: fewer on a
 * narrow screen, so that text keeps most of the width.
 */
const maxIndent = () => (matchMedia('(max-width: 480px)').matches ? 4 : 6)
const PAGE_SIZE = 200
/** How long the tree waits for the live feed to connect before it is read without it. */
const FEED_WAIT_MS = 2_000
const SORTS: Array<{ value: Sort; label: string }> = [
  { value: 'oldest', label: 'Oldest' },
  { value: 'newest', label: 'Newest' },
  { value: 'top', label: 'Top' },
]

interface Rendered {
  el: HTMLElement
  /** The replies' container, when this node's replies are shown in this view. */
  kids?: HTMLElement
  toggle?: HTMLButtonElement
  more?: HTMLButtonElement
  depthFromAnchor: number
}

export function showConversation(
  main: HTMLElement,
  conversationId: string,
  token: string,
  onUnauthorized: () => void,
): void {
  const params = new URLSearchParams(location.search)
  let sort: Sort =
    (['oldest', 'newest', 'top'] as const).find((s) => s === params.get('sort')) ?? 'oldest'
  let conversation = new Conversation(conversationId, sort)
  let meta: TreeMeta = {}
  let nextToken: string | undefined
  let complete = false
  let loading: Promise<void> | undefined
  let generation = 0
  /** Whether the first page is on screen (live Posts wait until it is). */
  let shown = false
  const rendered = new Map<string, Rendered>()
  /** Live Posts whose parent has not arrived yet (it may be on a page not loaded). */
  const pending: Post[] = []
  let anchorId = params.get('focus') ?? conversationId

  const coverage = h('p', { class: 'coverage', id: 'coverage' })
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Order of replies' })
  const crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Thread' })
  const tree = h('div', { class: 'tree', id: 'tree' })
  const more = h('button', { class: 'load-more', type: 'button' }, 'Load more replies')
  const announce = h('p', { class: 'sr-only', 'aria-live': 'polite' })
  main.replaceChildren(
    h('h1', {}, 'Conversation ', h('span', { class: 'mono' }, conversationId)),
    coverage,
    tabs,
    crumbs,
    tree,
    more,
    announce,
  )
  coverage.after(metricsHeader(conversationId, token, onUnauthorized))

  for (const { value, label } of SORTS) {
    const tab = h('button', { type: 'button', role: 'tab', 'data-sort': value }, label)
    tab.addEventListener('click', () => setSort(value))
    tabs.append(tab)
  }
  tabs.addEventListener('keydown', (event) => {
    const index = SORTS.findIndex((s) => s.value === sort)
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0
    if (step === 0) return
    event.preventDefault()
    const next = SORTS[(index + step + SORTS.length) % SORTS.length]!.value
    setSort(next)
    tabs.querySelector<HTMLElement>(`[data-sort="${next}"]`)?.focus()
  })

  const paintTabs = () => {
    for (const tab of tabs.querySelectorAll<HTMLElement>('[role=tab]')) {
      const selected = tab.dataset.sort === sort
      tab.setAttribute('aria-selected', String(selected))
      tab.tabIndex = selected ? 0 : -1
    }
  }

  const paintCoverage = () => {
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
    coverage.textContent = parts.join(' · ')
    more.hidden = complete
  }

  // --- rendering -------------------------------------------------------------------------------

  const user = (node: Node) => {
    const id = node.post?.author_id
    return id === undefined ? undefined : conversation.users.get(id)
  }

  const renderNode = (node: Node, depthFromAnchor: number): HTMLElement => {
    const el = node.post ? postElement(node) : placeholderElement(node)
    const entry: Rendered = { el, depthFromAnchor }
    rendered.set(node.id, entry)
    const head = el.querySelector<HTMLElement>('.head')!
    const toggle = h('button', { type: 'button', class: 'toggle' })
    toggle.addEventListener('click', () => setCollapsed(node, !node.collapsed))
    head.prepend(toggle)
    entry.toggle = toggle
    if (depthFromAnchor < maxIndent()) {
      const kids = h('div', { class: 'kids', role: 'group' })
      for (const child of node.children) kids.append(renderNode(child, depthFromAnchor + 1))
      el.append(kids)
      entry.kids = kids
    } else {
      const button = h('button', { type: 'button', class: 'continue' })
      button.addEventListener('click', () => focusOn(node.id, true))
      el.append(button)
      entry.more = button
    }
    paintNode(node)
    return el
  }

  const postElement = (node: Node): HTMLElement => {
    const post = node.post!
    const author = user(node)
    const isOp = post.author_id !== undefined && post.author_id === conversation.rootAuthorId
    const metrics = post.public_metrics ?? {}
    const el = h(
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
    return el
  }

  const placeholderElement = (node: Node): HTMLElement =>
    h(
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

  /** The toggle's label, the hidden count and the "continue" link of one node. */
  const paintNode = (node: Node) => {
    const entry = rendered.get(node.id)
    if (!entry) return
    const hasReplies = node.children.length > 0
    const hidden = conversation.hiddenCount(node)
    entry.el.classList.toggle('collapsed', node.collapsed)
    if (entry.toggle) {
      entry.toggle.hidden = !hasReplies
      entry.toggle.setAttribute('aria-expanded', String(!node.collapsed))
      entry.toggle.textContent = node.collapsed ? `+ ${hidden} hidden` : '−'
      entry.toggle.setAttribute(
        'aria-label',
        node.collapsed ? `Show ${hidden} hidden replies` : `Hide ${hidden} replies`,
      )
    }
    if (entry.kids) entry.kids.hidden = node.collapsed
    if (entry.more) {
      entry.more.hidden = !hasReplies || node.collapsed
      entry.more.textContent = `Continue this thread (${hidden}) →`
    }
  }

  const setCollapsed = (node: Node, collapsed: boolean) => {
    node.collapsed = collapsed
    paintNode(node)
  }

  /** The whole tree again, from the anchor (a re-anchored view shows one deep branch). */
  const renderAll = () => {
    rendered.clear()
    const anchor = conversation.nodes.get(anchorId) ?? conversation.root
    crumbs.replaceChildren()
    if (anchor !== conversation.root) {
      const up = h('button', { type: 'button', class: 'up' }, '← Whole conversation')
      up.addEventListener('click', () => focusOn(conversationId, true))
      const parent = anchor.parent
      crumbs.append(up)
      if (parent && parent !== conversation.root) {
        const back = h('button', { type: 'button', class: 'up' }, '↑ Parent')
        back.addEventListener('click', () => focusOn(parent.id, true))
        crumbs.append(' ', back)
      }
    }
    tree.replaceChildren(renderNode(anchor, 0))
  }

  /** Places a node added to the model into the view, if its parent is shown. */
  const place = (node: Node) => {
    const parent = node.parent
    if (!parent) return renderAll()
    for (let up: Node | undefined = parent; up; up = up.parent) paintNode(up)
    // A new placeholder comes into view with its first orphan (which it renders with itself).
    if (!parent.post && !rendered.has(parent.id) && parent.parent) place(parent)
    if (rendered.has(node.id)) return
    const entry = rendered.get(parent.id)
    if (!entry?.kids) return
    const el = renderNode(node, entry.depthFromAnchor + 1)
    const index = parent.children.indexOf(node)
    const after = parent.children[index + 1]
    const before = after ? rendered.get(after.id)?.el : undefined
    entry.kids.insertBefore(el, before && before.parentElement === entry.kids ? before : null)
  }

  const focusOn = (id: string, push: boolean) => {
    anchorId = id
    const url = new URL(location.href)
    if (id === conversationId) url.searchParams.delete('focus')
    else url.searchParams.set('focus', id)
    if (push) history.pushState({ focus: id }, '', url)
    renderAll()
    rendered.get(id)?.el.focus()
  }

  addEventListener('popstate', () => {
    anchorId = new URLSearchParams(location.search).get('focus') ?? conversationId
    renderAll()
  })

  // --- loading ---------------------------------------------------------------------------------

  const loadPage = async (): Promise<void> => {
    if (complete) return
    const mine = generation
    const path = apiPath(`/2/conversations/${conversationId}`, {
      max_results: String(PAGE_SIZE),
      sort,
      pagination_token: nextToken,
      'tweet.fields': POST_FIELDS,
      expansions: 'author_id',
      'user.fields': USER_FIELDS,
    })
    const page = await getJson<Page<Post, TreeMeta>>(path, token)
    if (mine !== generation) return
    const first = conversation.nodes.size <= 1 && !conversation.root.post
    shown = true
    meta = { ...meta, ...page.meta, next_token: page.meta?.next_token }
    nextToken = page.meta?.next_token
    complete = nextToken === undefined
    conversation.addUsers(page.includes?.users ?? [])
    const added: Node[] = []
    for (const post of page.data ?? []) {
      const node = conversation.addFromTree(post)
      if (node) added.push(node)
    }
    const waiting = pending.splice(0)
    keepViewport(tree, () => {
      if (first) renderAll()
      else for (const node of added) if (!rendered.has(node.id)) place(node)
      for (const post of waiting) addLive(post)
    })
    paintCoverage()
  }

  const loadMore = () => {
    if (loading || complete) return loading
    loading = loadPage()
      .catch((err: unknown) => failed(err))
      .finally(() => {
        loading = undefined
        // A short first page may leave the sentinel in view: keep filling the screen.
        if (!complete && isNearBottom()) void loadMore()
      })
    return loading
  }

  const isNearBottom = () => more.getBoundingClientRect().top < innerHeight + 800

  const failed = (err: unknown) => {
    if (err instanceof UnauthorizedError) return onUnauthorized()
    setStatus(`Could not load: ${err instanceof Error ? err.message : String(err)}`)
  }

  more.addEventListener('click', () => void loadMore())
  new IntersectionObserver(
    (entries) => {
      if (entries.some((e) => e.isIntersecting)) void loadMore()
    },
    { rootMargin: '800px 0px' },
  ).observe(more)

  const setSort = (next: Sort) => {
    if (next === sort) return
    sort = next
    const url = new URL(location.href)
    url.searchParams.set('sort', sort)
    history.replaceState(history.state, '', url)
    generation++
    conversation = new Conversation(conversationId, sort)
    shown = false
    nextToken = undefined
    complete = false
    loading = undefined
    paintTabs()
    void loadMore()
  }

  // --- live ------------------------------------------------------------------------------------

  let freshCount = 0
  const addLive = (post: Post) => {
    const node = conversation.addLive(post, complete)
    if (!node) {
      if (!conversation.nodes.get(post.id)?.post) pending.push(post)
      return
    }
    meta.post_count = (meta.post_count ?? 0) + 1
    meta.reply_count = (meta.reply_count ?? 0) + 1
    freshCount++
    if (node === conversation.root) renderAll()
    else place(node)
  }

  /**
   * The feed opens first and the tree is read once it is connected, so no reply falls between
   * them; what the feed sends before the first page is shown waits, and Posts that page holds are
   * dropped. Without a feed (refused, unreachable) the tree is read after a short wait anyway.
   */
  let treeStarted = false
  const startTree = () => {
    if (treeStarted) return
    treeStarted = true
    void loadMore()
  }
  setTimeout(startTree, FEED_WAIT_MS)
  followStream(
    apiPath(`/2/conversations/${conversationId}/stream`, {
      'tweet.fields': POST_FIELDS,
      expansions: 'author_id',
      'user.fields': USER_FIELDS,
    }),
    token,
    {
      onPost(post, users) {
        conversation.addUsers(users)
        if (!shown) return void pending.push(post)
        const before = freshCount
        keepViewport(tree, () => addLive(post))
        if (freshCount > before) {
          paintCoverage()
          announce.textContent = freshCount === 1 ? '1 new reply' : `${freshCount} new replies`
        }
      },
      onState(state) {
        startTree()
        document.body.dataset.live = state
        setStatus(state === 'live' ? '● Live' : state === 'reconnecting' ? 'Reconnecting…' : '')
      },
      onUnauthorized,
    },
  )

  // --- keyboard --------------------------------------------------------------------------------

  tree.addEventListener('keydown', (event) => {
    if (event.target instanceof HTMLInputElement) return
    const items = [...tree.querySelectorAll<HTMLElement>('.post, .missing')].filter(
      (el) => el.offsetParent !== null,
    )
    const current = (event.target as HTMLElement).closest<HTMLElement>('.post, .missing')
    const index = current ? items.indexOf(current) : -1
    const go = (i: number) => {
      const target = items[Math.max(0, Math.min(items.length - 1, i))]
      if (!target) return
      event.preventDefault()
      target.focus()
    }
    const node = current
      ? conversation.nodes.get(current.dataset.postId ?? current.dataset.missingId ?? '')
      : undefined
    switch (event.key) {
      case 'j':
      case 'ArrowDown':
        return go(index + 1)
      case 'k':
      case 'ArrowUp':
        return go(index - 1)
      case 'ArrowLeft':
        if (node && node.children.length > 0 && !node.collapsed) {
          event.preventDefault()
          setCollapsed(node, true)
        } else if (node?.parent) go(items.indexOf(rendered.get(node.parent.id)?.el ?? current!))
        return
      case 'ArrowRight':
        if (node?.collapsed) {
          event.preventDefault()
          setCollapsed(node, false)
        }
        return
    }
  })

  paintTabs()
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
