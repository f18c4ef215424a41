import type { FastifyInstance } from 'fastify'
import { newestUsersByUsernames, suspendedAmong, usersByIds, type ReadUser } from '@threadline/db'
import {
  notFound,
  selection,
  shapeUser,
  TWEET_FIELDS,
  USER_FIELDS,
  userSuspended,
  type ResourceNotFound,
  type UserSuspended,
  type WirePost,
  type WireUser,
} from '@threadline/domain'
import { invalidRequest } from '../errors.js'
import type { EndpointParams } from '../params.js'
import { readPosts } from '../pipeline/index.js'
import type { ServerContext } from '../types.js'
import { addRoute, compact, type Endpoint } from './route.js'

/** The Post-valued members of a user that `expansions` may name. */
const USER_EXPANSIONS = ['most_recent_tweet_id', 'pinned_tweet_id'] as const

const USER_FIELD_PARAMS = {
  'user.fields': { kind: 'list', values: USER_FIELDS, description: 'User fields to return' },
  expansions: { kind: 'list', values: USER_EXPANSIONS, description: 'Posts to include' },
  'tweet.fields': { kind: 'list', values: TWEET_FIELDS, description: 'Fields of included Posts' },
} as const satisfies EndpointParams

const USERS_PARAMS = {
  ids: { kind: 'ids', min: 1, max: 100, required: true, description: 'User ids' },
  ...USER_FIELD_PARAMS,
} as const satisfies EndpointParams

const USER_PARAMS = {
  id: { kind: 'id', required: true, description: 'A user id' },
  ...USER_FIELD_PARAMS,
} as const satisfies EndpointParams

const USERS_BY_PARAMS = {
  usernames: {
    kind: 'string',
    required: true,
    description: 'Usernames, comma-separated (1–100)',
  },
  ...USER_FIELD_PARAMS,
} as const satisfies EndpointParams

const USER_BY_PARAMS = {
  username: { kind: 'string', required: true, description: 'A username' },
  ...USER_FIELD_PARAMS,
} as const satisfies EndpointParams

export const USERS = {
  method: 'GET',
  url: '/2/users',
  name: 'users-lookup',
  group: 'lookup',
  params: USERS_PARAMS,
  summary: 'Users by ids',
} as const satisfies Endpoint<typeof USERS_PARAMS>

export const USER = {
  method: 'GET',
  url: '/2/users/:id',
  name: 'users-lookup-one',
  group: 'lookup',
  params: USER_PARAMS,
  summary: 'A user by id',
} as const satisfies Endpoint<typeof USER_PARAMS>

export const USERS_BY = {
  method: 'GET',
  url: '/2/users/by',
  name: 'users-by-usernames',
  group: 'lookup',
  params: USERS_BY_PARAMS,
  summary: 'Users by usernames',
} as const satisfies Endpoint<typeof USERS_BY_PARAMS>

export const USER_BY = {
  method: 'GET',
  url: '/2/users/by/username/:username',
  name: 'users-by-username',
  group: 'lookup',
  params: USER_BY_PARAMS,
  summary: 'A user by username',
} as const satisfies Endpoint<typeof USER_BY_PARAMS>

const USERNAME = /^[A-Za-z0-9_]{1,15}$/
const USERNAME_TEXT = '^[A-Za-z0-9_]{1,15}$'

/** Usernames as X validates them: 1–100 of them, each X's pattern; all failures at once. */
function usernamesOf(name: string, raw: string, max: number): string[] {
  const items = raw.split(',').filter((v) => v !== '')
  if (items.length < 1 || items.length > max) {
    throw invalidRequest(
      name,
      [raw],
      `The number of values in the \`${name}\` query parameter list [${items.length}] is not between 1 and ${max}`,
    )
  }
  const bad = items.filter((u) => !USERNAME.test(u))
  if (bad.length > 0) {
    throw invalidRequest(
      name,
      bad,
      `The \`${name}\` query parameter value [${bad[0]}] does not match ${USERNAME_TEXT}`,
    )
  }
  return items
}

interface UserParams {
  'user.fields'?: readonly string[]
  expansions?: readonly string[]
  'tweet.fields'?: readonly string[]
}

/**
 * Users shaped by `user.fields` (domain's shapeUser), with the Posts their expansions name in
 * `includes.tweets`: one read of all of them through the read pipeline.
 */
async function renderUsers(
  ctx: ServerContext,
  users: readonly ReadUser[],
  p: UserParams,
): Promise<{ data: WireUser[]; includes?: { tweets: WirePost[] }; errors: ResourceNotFound[] }> {
  const expansions = p.expansions ?? []
  const fields = new Set<string>([...(p['user.fields'] ?? []), ...expansions])
  const data = users.map((u) => shapeUser(u, fields))
  const wanted: Array<{ parameter: string; id: string }> = []
  for (const u of users) {
    for (const e of expansions) {
      const id = u.raw[e]
      if (typeof id === 'string' && !wanted.some((w) => w.id === id)) {
        wanted.push({ parameter: e, id })
      }
    }
  }
  if (wanted.length === 0) return { data, errors: [] }
  const page = await readPosts(
    ctx.readDb,
    wanted.map((w) => w.id),
    selection(p['tweet.fields'] ?? []),
  )
  const tweets = page.data.map((json) => JSON.parse(json) as WirePost)
  const found = new Set(tweets.map((t) => t.id))
  const errors = wanted
    .filter((w) => !found.has(w.id))
    .map((w) => notFound('tweet', w.parameter, w.id))
  return { data, ...(tweets.length > 0 ? { includes: { tweets } } : {}), errors }
}

/** User lookup by ids and by usernames (docs/api.md §2.7). */
export function registerUserRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { readDb } = ctx

  addRoute(app, ctx, USERS, async (c) => {
    const ids = [...new Set(c.params.ids)]
    const found = new Map((await usersByIds(readDb, ids)).map((u) => [u.id, u]))
    const users = ids.flatMap((id) => found.get(id) ?? [])
    const page = await renderUsers(ctx, users, c.params)
    const absent = ids.filter((id) => !found.has(id))
    const suspended = (await suspendedAmong(readDb, { ids: absent })).ids
    const missing = absent.map((id) =>
      suspended.has(id) ? userSuspended('ids', id) : notFound('user', 'ids', id),
    )
    return { body: compact({ ...page, errors: [...missing, ...page.errors] }) }
  })

  addRoute(app, ctx, USER, async (c) => {
    const [user] = await usersByIds(readDb, [c.params.id])
    if (!user) {
      const suspended = (await suspendedAmong(readDb, { ids: [c.params.id] })).ids.size > 0
      const error = suspended
        ? userSuspended('id', c.params.id)
        : notFound('user', 'id', c.params.id)
      return { body: { errors: [error] } }
    }
    const page = await renderUsers(ctx, [user], c.params)
    return { body: compact({ ...page, data: page.data[0] }) }
  })

  addRoute(app, ctx, USERS_BY, async (c) => {
    const names = usernamesOf('usernames', c.params.usernames, 100)
    const found = new Map(
      (await newestUsersByUsernames(readDb, names)).map((u) => [u.username.toLowerCase(), u]),
    )
    const seen = new Set<string>()
    const users: ReadUser[] = []
    const absent: string[] = []
    for (const name of names) {
      const key = name.toLowerCase()
      if (seen.has(key)) continue
      seen.add(key)
      const user = found.get(key)
      if (user) users.push(user)
      else absent.push(name)
    }
    const suspended = (await suspendedAmong(readDb, { usernames: absent })).usernames
    const missing: Array<ResourceNotFound | UserSuspended> = absent.map((name) =>
      suspended.has(name.toLowerCase())
        ? userSuspended('usernames', name)
        : notFound('user', 'usernames', name),
    )
    const page = await renderUsers(ctx, users, c.params)
    return { body: compact({ ...page, errors: [...missing, ...page.errors] }) }
  })

  addRoute(app, ctx, USER_BY, async (c) => {
    const [name] = usernamesOf('username', c.params.username, 1)
    const [user] = await newestUsersByUsernames(readDb, [name!])
    if (!user) {
      const suspended = (await suspendedAmong(readDb, { usernames: [name!] })).usernames.size > 0
      const error = suspended
        ? userSuspended('username', name!)
        : notFound('user', 'username', name!)
      return { body: { errors: [error] } }
    }
    const page = await renderUsers(ctx, [user], c.params)
    return { body: compact({ ...page, data: page.data[0] }) }
  })
}
