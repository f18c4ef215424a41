import { describe, expect, it } from 'vitest'
import { orQueries } from './jobs/recover-window.js'
import { newestId, postIdOfLine } from './stream-mark.js'

const line = (s: string) => Buffer.from(s)

describe('postIdOfLine', () => {
  it("takes the data object's own id, not a nested one, nor a value that reads id", () => {
    const l = line(
      '{"data":{"entities":{"mentions":[{"id":"9","username":"a"}]},"lang":"id",' +
        '"referenced_tweets":[{"type":"quoted","id":"8"}],"text":"say \\"id\\":\\"7\\"","id":"1234"},' +
        '"includes":{"tweets":[{"id":"99999"}]}}',
    )
    expect(postIdOfLine(l)).toBe('1234')
  })

  it('parses a line of any other shape, and gives nothing for a line without a valid id', () => {
    expect(postIdOfLine(line('{ "matching_rules": [], "data": { "id": "42" } }'))).toBe('42')
    expect(postIdOfLine(line('{"data":{"text":"cut off mid'))).toBeUndefined()
    expect(postIdOfLine(line('{"data":{"id":"12x"}}'))).toBeUndefined()
    expect(postIdOfLine(line('not json'))).toBeUndefined()
  })

  it('finds the newest of a batch as 64-bit ids, not as text or numbers', () => {
    const ids = ['999', '2126666006242787329', '2126666006242787328', '10000']
    expect(newestId(ids.map((id) => line(`{"data":{"id":"${id}"}}`)))).toBe('2126666006242787329')
  })
})

describe('orQueries', () => {
  it('OR-combines values within the length limit, bracketing those with spaces', () => {
    const values = ['conversation_id:1', 'b c', 'conversation_id:22', 'd']
    expect(orQueries(values, 512)).toEqual([
      '(b c) OR conversation_id:1 OR conversation_id:22 OR d',
    ])
    const split = orQueries(values, 30)
    expect(split).toEqual(['(b c) OR conversation_id:1', 'conversation_id:22 OR d'])
    for (const q of split) expect(q.length).toBeLessThanOrEqual(30)
    // A value longer than the limit goes alone; repeats once.
    expect(orQueries(['x'.repeat(40), 'y', 'y'], 30)).toEqual(['x'.repeat(40), 'y'])
  })
})
