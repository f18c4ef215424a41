import {
  apiPath,
  getJson,
  POST_FIELDS,
  UnauthorizedError,
  USER_FIELDS,
  type Page,
  type Post,
  type User,
} from './api.js'
import {
  conversationHeader,
  type ConversationHeader,
  type TreeMeta,
} from './conversation-header.js'
import { h, keepViewport, setStatus } from './dom.js'
import { followConversation } from './live-feed.js'
import { sortFromUrl, sortTabs } from './sort-tabs.js'
import { Conversation, type Node, type Sort } from './tree.js'
import { TreeView } from './tree-view.js'
import { metricsHeader } from './metrics-header.js'

/**
 * The page of one conversation (docs/api.md §6): an indented tree read page by page from
 * `GET /2/conversations/:id`, kept current by `GET /2/conversations/:id/stream`.
 */

const PAGE_SIZE = 200

interface PagesOptions {
  conversationId: string
  token: string
  sort: Sort
  view: TreeView
  /** After a page is placed in the view. */
  onPage(): void
  onError(err: unknown): void
  /** Whether to read on: the end of what is shown is near the bottom of the screen. */
  nearBottom(): boolean
}

/** The tree's pages, read in order, and the live Posts merged into them. */
class TreePages {
  meta: TreeMeta = {}
  complete = false
  /** Live Posts shown since the page opened. */
  freshCount = 0
  private nextToken: string | undefined
  private loading: Promise<void> | undefined
  private generation = 0
  /** Whether the first page is on screen (live Posts wait until it is). */
  private shown = false
  /** Live Posts whose parent has not arrived yet (it may be on a page not loaded). */
  private readonly pending: Post[] = []

  private readonly conversationId: string
  private sort: Sort
  private readonly view: TreeView

  constructor(private readonly page: PagesOptions) {
    this.conversationId = page.conversationId
    this.sort = page.sort
    this.view = page.view
  }

  /** Reads the next page unless one is being read or none is left. */
  loadMore(): Promise<void> | undefined {
    if (this.loading || this.complete) return this.loading
    this.loading = this.loadPage()
      .catch((err: unknown) => this.page.onError(err))
      .finally(() => {
        this.loading = undefined
        // A short first page may leave the sentinel in view: keep filling the screen.
        if (!this.complete && this.page.nearBottom()) void this.loadMore()
      })
    return this.loading
  }

  /** Starts again from the first page in another order; a page on its way is dropped. */
  reset(sort: Sort): void {
    this.sort = sort
    this.generation++
    this.view.conversation = new Conversation(this.conversationId, sort)
    this.shown = false
    this.nextToken = undefined
    this.complete = false
    this.loading = undefined
  }

  /** A Post from the live feed: shown at once once the first page is, else kept until then. */
  live(post: Post, users: User[]): void {
    this.view.conversation.addUsers(users)
    if (!this.shown) return void this.pending.push(post)
    this.addLive(post)
  }

  private async loadPage(): Promise<void> {
    if (this.complete) return
    const mine = this.generation
    const conversation = this.view.conversation
    const path = apiPath(`/2/conversations/${this.conversationId}`, {
      max_results: String(PAGE_SIZE),
      sort: this.sort,
      pagination_token: this.nextToken,
      'tweet.fields': POST_FIELDS,
      expansions: 'author_id',
      'user.fields': USER_FIELDS,
    })
    const page = await getJson<Page<Post, TreeMeta>>(path, this.page.token)
    if (mine !== this.generation) return
    const first = conversation.nodes.size <= 1 && !conversation.root.post
    this.shown = true
    this.meta = { ...this.meta, ...page.meta, next_token: page.meta?.next_token }
    this.nextToken = page.meta?.next_token
    this.complete = this.nextToken === undefined
    conversation.addUsers(page.includes?.users ?? [])
    const added: Node[] = []
    for (const post of page.data ?? []) {
      const node = conversation.addFromTree(post)
      if (node) added.push(node)
    }
    const waiting = this.pending.splice(0)
    keepViewport(this.view.el, () => {
      if (first) this.view.renderAll()
      else for (const node of added) if (!this.view.has(node.id)) this.view.place(node)
      for (const post of waiting) this.addLive(post)
    })
    this.page.onPage()
  }

  private addLive(post: Post): void {
    const conversation = this.view.conversation
    const node = conversation.addLive(post, this.complete)
    if (!node) {
      if (!conversation.nodes.get(post.id)?.post) this.pending.push(post)
      return
    }
    this.meta.post_count = (this.meta.post_count ?? 0) + 1
    this.meta.reply_count = (this.meta.reply_count ?? 0) + 1
    this.freshCount++
    if (node === conversation.root) this.view.renderAll()
    else this.view.place(node)
  }
}

export function showConversation(
  main: HTMLElement,
  conversationId: string,
  token: string,
  onUnauthorized: () => void,
): void {
  let sort = sortFromUrl(new URLSearchParams(location.search))
  const header: ConversationHeader = conversationHeader(conversationId)
  const tabs = sortTabs(
    () => sort,
    (next) => setSort(next),
  )
  const view = new TreeView(conversationId, new Conversation(conversationId, sort))
  const more = h('button', { class: 'load-more', type: 'button' }, 'Load more replies')
  const announce = h('p', { class: 'sr-only', 'aria-live': 'polite' })
  main.replaceChildren(
    ...header.elements,
    metricsHeader(conversationId, token, onUnauthorized),
    tabs.el,
    view.crumbs,
    view.el,
    more,
    announce,
  )

  const paint = () => {
    header.paint(pages.meta)
    more.hidden = pages.complete
  }
  const pages = new TreePages({
    conversationId,
    token,
    sort,
    view,
    onPage: paint,
    onError(err) {
      if (err instanceof UnauthorizedError) return onUnauthorized()
      setStatus(`Could not load: ${err instanceof Error ? err.message : String(err)}`)
    },
    nearBottom: () => more.getBoundingClientRect().top < innerHeight + 800,
  })

  more.addEventListener('click', () => void pages.loadMore())
  new IntersectionObserver(
    (entries) => {
      if (entries.some((e) => e.isIntersecting)) void pages.loadMore()
    },
    { rootMargin: '800px 0px' },
  ).observe(more)

  const setSort = (next: Sort) => {
    if (next === sort) return
    sort = next
    const url = new URL(location.href)
    url.searchParams.set('sort', sort)
    history.replaceState(history.state, '', url)
    pages.reset(sort)
    tabs.paint(sort)
    void pages.loadMore()
  }

  followConversation(conversationId, token, {
    onPost(post, users) {
      const before = pages.freshCount
      keepViewport(view.el, () => pages.live(post, users))
      if (pages.freshCount > before) {
        paint()
        announce.textContent =
          pages.freshCount === 1 ? '1 new reply' : `${pages.freshCount} new replies`
      }
    },
    onReady: () => void pages.loadMore(),
    onUnauthorized,
  })

  tabs.paint(sort)
}
