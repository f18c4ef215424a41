import type { Prng } from './prng.js'
import type { WithdrawalStates } from './withdrawal-states.js'
import type { WithdrawalEvent } from './withdrawal-event.js'
import type { SimPost, World } from './world.js'

const COUNTRIES = ['DE', 'FR', 'IN', 'TR', 'BR', 'RU']

/** A Post to withdraw: often one of a demo conversation's replies, else a recent one. */
function pickPost(world: World, prng: Prng, states: WithdrawalStates): SimPost | undefined {
  const demos = world.demoConversations()
  if (demos.length > 0 && prng.chance(0.5)) {
    const conv = world.conversation(prng.pick(demos)) ?? []
    const replies = conv.filter((p) => p.kind === 'reply' && !states.isDeleted(p.id))
    if (replies.length > 0) return prng.pick(replies)
  }
  const recent = world.since(world.startMs - 86_400_000)
  for (let tries = 0; tries < 5 && recent.length > 0; tries++) {
    const p = recent[Math.floor(prng.next() * recent.length)]!
    if (!states.isDeleted(p.id)) return p
  }
  return undefined
}

/** A Post event of the mix: mostly deletes, then drops and undrops, withholdings, edits. */
function postEvent(
  r: number,
  post: SimPost,
  prng: Prng,
  states: WithdrawalStates,
  eventAt: string,
) {
  const base = { kind: 'tweet' as const, id: post.id, authorId: post.authorId, eventAt }
  if (r < 0.55) return { ...base, action: 'delete' as const }
  if (r >= 0.97) return { ...base, action: states.isDropped(post.id) ? 'undrop' : 'drop' } as const
  if (r < 0.6) {
    return { ...base, action: 'withheld' as const, withheldInCountries: [prng.pick(COUNTRIES)] }
  }
  return {
    ...base,
    action: 'tweet_edit' as const,
    initialTweetId: post.id,
    editTweetIds: [post.id],
  }
}

/**
 * One event of the world's mix at `atMs`, not yet applied: Posts deleted (most often), withheld,
 * edited, dropped and undropped; users protected, suspended, deleted (or the reversal of what they
 * are), withheld, geo-scrubbed. Undefined when the world has nothing to draw from.
 */
export function drawWithdrawal(
  world: World,
  prng: Prng,
  states: WithdrawalStates,
  atMs: number,
): WithdrawalEvent | undefined {
  const r = prng.next()
  const eventAt = new Date(atMs).toISOString()
  if (r < 0.62 || r >= 0.97) {
    const post = pickPost(world, prng, states)
    return post ? postEvent(r, post, prng, states, eventAt) : undefined
  }
  const user = world.users[prng.int(0, world.users.length - 1)]
  if (!user) return undefined
  const s = states.user(user.id)
  const base = { kind: 'user' as const, id: user.id, eventAt }
  if (r < 0.74) return { ...base, action: s.protectedAt ? 'user_unprotect' : 'user_protect' }
  if (r < 0.84) return { ...base, action: s.suspendedAt ? 'user_unsuspend' : 'user_suspend' }
  if (r < 0.9) return { ...base, action: s.deletedAt ? 'user_undelete' : 'user_delete' }
  if (r < 0.94) {
    return { ...base, action: 'user_withheld', withheldInCountries: [prng.pick(COUNTRIES)] }
  }
  const newest = world.newestFirst()[Symbol.iterator]().next()
  return { ...base, action: 'scrub_geo', ...(newest.done ? {} : { upToTweetId: newest.value.id }) }
}
