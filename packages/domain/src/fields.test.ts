import { describe, expect, it } from 'vitest'
import {
  assembleIncludes,
  firstTargets,
  primaryFields,
  secondTargets,
  selection,
  shapePost,
  shapeUser,
  type StoredPost,
  type StoredUser,
} from './fields.js'

const post = (id: string, extra: Partial<StoredPost['raw']> = {}, author = '10'): StoredPost => ({
  id,
  text: `text ${id}`,
  created_at: new Date('2026-11-20T10:00:00Z'),
  conversation_id: '1',
  author_id: author,
  in_reply_to_user_id: null,
  raw: { id, text: `text ${id}`, author_id: author, created_at: '2026-11-20T10:00:00Z', ...extra },
})
const user = (id: string, username: string): StoredUser => ({
  id,
  name: `Name ${id}`,
  username,
  raw: {
    id,
    name: `Name ${id}`,
    username,
    description: 'about',
    created_at: '2020-01-01T00:00:00.000Z',
  },
})

describe('shapePost', () => {
  it('returns id and text plus requested fields that exist, created_at with milliseconds', () => {
    const p = post('5', { lang: 'en' })
    expect(shapePost(p, new Set())).toEqual({ id: '5', text: 'text 5' })
    expect(shapePost(p, new Set(['created_at', 'lang', 'geo', 'conversation_id']))).toEqual({
      id: '5',
      text: 'text 5',
      created_at: '2026-11-20T10:00:00.000Z',
      lang: 'en',
      conversation_id: '1',
    })
  })

  it('edit_history_tweet_ids defaults to the Post itself', () => {
    expect(
      shapePost(post('5'), new Set(['edit_history_tweet_ids'])).edit_history_tweet_ids,
    ).toEqual(['5'])
  })

  it('expansions add their linking fields', () => {
    const fields = primaryFields(selection([], ['author_id', 'referenced_tweets.id.author_id']))
    expect([...fields].sort()).toEqual(['author_id', 'referenced_tweets'])
  })
})

describe('shapeUser', () => {
  it('returns id, name, username and requested fields', () => {
    expect(shapeUser(user('10', 'ten'), new Set(['description', 'location']))).toEqual({
      id: '10',
      name: 'Name 10',
      username: 'ten',
      description: 'about',
    })
  })
})

describe('expansions', () => {
  const sel = selection(
    ['created_at'],
    [
      'author_id',
      'referenced_tweets.id',
      'referenced_tweets.id.author_id',
      'entities.mentions.username',
    ],
  )
  const a = post('100', {
    referenced_tweets: [
      { type: 'quoted', id: '50' },
      { type: 'replied_to', id: '51' },
    ],
    entities: { mentions: [{ username: 'Eleven' }, { username: 'ghost' }] },
  })
  const b = post('101', { referenced_tweets: [{ type: 'quoted', id: '50' }] }, '11')

  it('plans batched lookups, de-duplicated', () => {
    expect(firstTargets([a, b], sel)).toEqual({
      tweetIds: ['50', '51'],
      userIds: ['10', '11'],
      usernames: ['eleven', 'ghost'],
    })
    const referenced = [post('50', {}, '12'), post('51', {}, '10')]
    expect(secondTargets(referenced, sel, new Set(['10', '11']))).toEqual(['12'])
  })

  it('assembles includes in first-seen order with not-found errors', () => {
    const loaded = {
      posts: new Map([['50', post('50', {}, '12')]]),
      users: new Map([
        ['10', user('10', 'ten')],
        ['11', user('11', 'Eleven')],
        ['12', user('12', 'twelve')],
      ]),
      usersByName: new Map([['eleven', user('11', 'Eleven')]]),
    }
    const { includes, errors } = assembleIncludes([a, b], sel, loaded)
    expect(includes!.users!.map((u) => u.id)).toEqual(['10', '11', '12'])
    expect(includes!.tweets).toEqual([
      { id: '50', text: 'text 50', created_at: '2026-11-20T10:00:00.000Z', author_id: '12' },
    ])
    expect(errors.map((e) => [e.parameter, e.value, e.resource_type])).toEqual([
      ['entities.mentions.username', 'ghost', 'user'],
      ['referenced_tweets.id', '51', 'tweet'],
    ])
    expect(errors[1]!.detail).toBe('Could not find tweet with referenced_tweets.id: [51].')
  })

  it('no expansions: no includes', () => {
    expect(
      assembleIncludes([a], selection(), {
        posts: new Map(),
        users: new Map(),
        usersByName: new Map(),
      }),
    ).toEqual({
      includes: undefined,
      errors: [],
    })
  })
})
