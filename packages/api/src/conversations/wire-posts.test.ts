import { describe, expect, it } from 'vitest'
import { WirePosts } from './wire-posts.js'

const posts = (from: number, n: number) =>
  new Map(Array.from({ length: n }, (_, i) => [String(from + i), `{"id":"${from + i}"}`]))

describe('WirePosts', () => {
  it('keeps the most recently kept Posts of each field list, within its bounds', () => {
    const wire = new WirePosts()
    wire.keep('text', posts(0, 1500))
    wire.keep('text', posts(1500, 1000))
    expect(wire.get('text')!.size).toBe(2000)
    expect(wire.get('text')!.has('0')).toBe(false)
    expect(wire.get('text')!.has('2499')).toBe(true)
    // Kept again, a Post is the most recent: it outlives those kept after it the first time.
    wire.keep('text', posts(500, 1))
    wire.keep('text', posts(5000, 1))
    expect(wire.get('text')!.has('500')).toBe(true)
    expect(wire.get('text')!.has('501')).toBe(false)
    for (const fields of ['a', 'b', 'c', 'd']) wire.keep(fields, posts(0, 1))
    expect(wire.get('d')).toBeUndefined()
    expect(wire.count).toBe(2000 + 3)
  })

  it('copies without the Posts a change named', () => {
    const wire = new WirePosts()
    wire.keep('text', posts(0, 3))
    wire.keep('lang', posts(0, 3))
    const next = wire.without(new Set(['1']))
    expect([...next.get('text')!.keys()]).toEqual(['0', '2'])
    expect([...next.get('lang')!.keys()]).toEqual(['0', '2'])
    expect(next.count).toBe(4)
    expect(wire.count).toBe(6)
  })
})
