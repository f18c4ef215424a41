import { describe, expect, it } from 'vitest'
import type { Post } from '../client/wire.js'
import { Conversation, postText } from '../client/tree.js'

/** The viewer's model of a conversation (docs/api.md §6), fed as the API pages it. */

const post = (id: string, depth: number, parent?: string, extra: Partial<Post> = {}): Post => ({
  id,
  text: `post ${id}`,
  author_id: id === '1' ? '100' : '200',
  thread: {
    depth,
    ...(parent ? { parent_id: parent } : {}),
    reply_count: 0,
    descendant_count: 0,
  },
  ...extra,
})

const shape = (c: Conversation) => {
  const out: string[] = []
  const walk = (node: typeof c.root, indent: string) => {
    out.push(`${indent}${node.post ? node.id : `[missing ${node.id}]`}@${node.depth}`)
    for (const child of node.children) walk(child, `${indent}  `)
  }
  walk(c.root, '')
  return out
}

describe('Conversation', () => {
  it('builds the tree from pages, orphans under one placeholder per missing parent', () => {
    const c = new Conversation('1', 'oldest')
    for (const p of [
      post('1', 0),
      post('2', 1, '1'),
      post('3', 2, '2'),
      post('5', 1, '1'),
      post('7', 1, '6', { thread: { depth: 1, parent_id: '6', missing_parent: true } }),
      post('8', 2, '7'),
      post('9', 1, '6', { thread: { depth: 1, parent_id: '6', missing_parent: true } }),
    ]) {
      c.addFromTree(p)
    }
    expect(shape(c)).toEqual([
      '1@0',
      '  2@1',
      '    3@2',
      '  5@1',
      '  [missing 6]@1',
      '    7@1',
      '      8@2',
      '    9@1',
    ])
    expect(c.rootAuthorId).toBe('100')
    expect(c.addFromTree(post('3', 2, '2'))).toBeUndefined()
  })

  it('hangs everything under a placeholder root when the root is not stored', () => {
    const c = new Conversation('1', 'oldest')
    c.addFromTree(post('2', 1, '1', { thread: { depth: 1, parent_id: '1', missing_parent: true } }))
    expect(shape(c)).toEqual(['[missing 1]@0', '  2@1'])
  })

  it('puts a live reply where the sort puts new ones, before the placeholders, and counts it', () => {
    const oldest = new Conversation('1', 'oldest')
    const newest = new Conversation('1', 'newest')
    for (const c of [oldest, newest]) {
      c.addFromTree({ ...post('1', 0), thread: { depth: 0, descendant_count: 2 } })
      c.addFromTree(post('2', 1, '1'))
      c.addFromTree(
        post('7', 1, '6', { thread: { depth: 1, parent_id: '6', missing_parent: true } }),
      )
    }
    const live: Post = {
      id: '10',
      text: 'new',
      referenced_tweets: [{ type: 'replied_to', id: '1' }],
    }
    expect(oldest.addLive(live, true)?.fresh).toBe(true)
    expect(newest.addLive(live, true)?.depth).toBe(1)
    expect(oldest.root.children.map((n) => n.id)).toEqual(['2', '10', '6'])
    expect(newest.root.children.map((n) => n.id)).toEqual(['10', '2', '6'])
    expect(oldest.hiddenCount(oldest.root)).toBe(3)
    expect(oldest.addLive(live, true)).toBeUndefined()
  })

  it('holds a live reply to an unknown parent until every page is read, then shows it orphaned', () => {
    const c = new Conversation('1', 'oldest')
    c.addFromTree(post('1', 0))
    const live: Post = { id: '10', text: 'x', referenced_tweets: [{ type: 'replied_to', id: '4' }] }
    expect(c.addLive(live, false)).toBeUndefined()
    expect(c.addLive(live, true)?.parent?.id).toBe('4')
    expect(shape(c)).toEqual(['1@0', '  [missing 4]@1', '    10@1'])
  })
})

describe('postText', () => {
  it("undoes X's escaping of &, < and > only", () => {
    expect(postText('a &amp; b &lt;3 &gt; &quot;')).toBe('a & b <3 > &quot;')
  })
})
