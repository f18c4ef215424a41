import { FIELD_PARAMS, idList } from '../params.js'
import { IncludesBuilder, postJson, userJson, viewOf, type FieldValues } from '../serialize.js'
import { defineRoute, type SimContext, type SimRoute } from './route.js'

const notFoundError = (kind: 'tweet' | 'user', param: string, id: string) => ({
  value: id,
  detail: `Could not find ${kind} with ${param}: [${id}].`,
  title: 'Not Found Error',
  resource_type: kind,
  parameter: param,
  resource_id: id,
  type: 'https://api.twitter.com/2/problems/resource-not-found',
})

/** X's item for a Post it may not show (its author is protected). */
const notAuthorizedError = (param: string, id: string) => ({
  value: id,
  detail: `Sorry, you are not authorized to see the Tweet with ${param}: [${id}].`,
  title: 'Authorization Error',
  resource_type: 'tweet',
  parameter: param,
  resource_id: id,
  type: 'https://api.twitter.com/2/problems/not-authorized-for-resource',
})

const USER_PARAMS = {
  'user.fields': FIELD_PARAMS['user.fields'],
  'tweet.fields': FIELD_PARAMS['tweet.fields'],
  expansions: FIELD_PARAMS.expansions,
} as const

/** `GET /2/tweets`, `/2/tweets/:id`, `/2/users` and `/2/users/:id`. */
export function lookupRoutes({ world, withdrawals }: SimContext): SimRoute[] {
  function posts(ids: readonly string[], params: FieldValues, single: boolean): string {
    const view = viewOf(params)
    const includes = new IncludesBuilder(world, view)
    const found: string[] = []
    const param = single ? 'id' : 'ids'
    for (const id of ids) {
      const post = world.get(id)
      // A withdrawn Post answers as X does: protected → not authorized, else not found.
      const withdrawn = withdrawals.postState(id, post?.authorId)
      if (!post || withdrawn) {
        includes.error(
          withdrawn === 'protected'
            ? notAuthorizedError(param, id)
            : notFoundError('tweet', param, id),
        )
        continue
      }
      found.push(postJson(world, post, view))
      includes.add(post)
    }
    const suffix = includes.suffix()
    if (found.length === 0) return `{${suffix.slice(1)}}`
    return `{"data":${single ? found[0] : `[${found.join(',')}]`}${suffix}}`
  }

  function users(ids: readonly string[], params: FieldValues, single: boolean): string {
    const view = viewOf(params)
    const found: string[] = []
    const errors: unknown[] = []
    const param = single ? 'id' : 'ids'
    for (const id of ids) {
      const user = world.user(id)
      const gone = withdrawals.userState(id)
      if (user && gone !== 'deactivated' && gone !== 'suspended') found.push(userJson(user, view))
      else errors.push(notFoundError('user', param, id))
    }
    const errorsPart = errors.length > 0 ? `"errors":${JSON.stringify(errors)}` : ''
    if (found.length === 0) return `{${errorsPart}}`
    return `{"data":${single ? found[0] : `[${found.join(',')}]`}${errorsPart ? ',' + errorsPart : ''}}`
  }

  const lookup = { fault: 'lookup', window: 'lookup', method: 'GET' } as const
  const userLookup = { fault: 'users', window: 'users', method: 'GET' } as const
  return [
    defineRoute(
      { ...lookup, path: '/2/tweets', params: { ids: idList(100), ...FIELD_PARAMS } },
      ({ params }) => ({ status: 200, body: posts(params.ids, params, false) }),
    ),
    defineRoute({ ...lookup, path: /^\/2\/tweets\/\d+$/, params: FIELD_PARAMS }, (c) => ({
      status: 200,
      body: posts([c.path.slice('/2/tweets/'.length)], c.params, true),
    })),
    defineRoute(
      { ...userLookup, path: '/2/users', params: { ids: idList(100), ...USER_PARAMS } },
      ({ params }) => ({ status: 200, body: users(params.ids, params, false) }),
    ),
    defineRoute({ ...userLookup, path: /^\/2\/users\/\d+$/, params: USER_PARAMS }, (c) => ({
      status: 200,
      body: users([c.path.slice('/2/users/'.length)], c.params, true),
    })),
  ]
}
