import { apiPath, followStream, POST_FIELDS, USER_FIELDS, type Post, type User } from './api.js'
import { setStatus } from './dom.js'

/** How long the tree waits for the live feed to connect before it is read without it. */
const FEED_WAIT_MS = 2_000

export interface LiveFeedHandlers {
  onPost(post: Post, users: User[]): void
  /** Once: when the feed is connected, or gave up connecting for now, or FEED_WAIT_MS passed. */
  onReady(): void
  onUnauthorized(): void
}

/**
 * The conversation's new Posts from `GET /2/conversations/:id/stream`, its state shown in the
 * status line. The feed opens first and the tree is read once it is connected (`onReady`), so no
 * reply falls between them; without a feed (refused, unreachable) the tree is read after a short
 * wait anyway.
 */
export function followConversation(
  conversationId: string,
  token: string,
  handlers: LiveFeedHandlers,
): void {
  let ready = false
  const onReady = () => {
    if (ready) return
    ready = true
    handlers.onReady()
  }
  setTimeout(onReady, FEED_WAIT_MS)
  followStream(
    apiPath(`/2/conversations/${conversationId}/stream`, {
      'tweet.fields': POST_FIELDS,
      expansions: 'author_id',
      'user.fields': USER_FIELDS,
    }),
    token,
    {
      onPost: handlers.onPost,
      onState(state) {
        onReady()
        document.body.dataset.live = state
        setStatus(state === 'live' ? '● Live' : state === 'reconnecting' ? 'Reconnecting…' : '')
      },
      onUnauthorized: handlers.onUnauthorized,
    },
  )
}
