import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { searchTerms, tokenize } from './tokens.js'

describe('tokenize', () => {
  it.each<[string, string[]]>([
    ['Coca-Cola!', ['coca', 'cola']],
    ["don't STOP", ['don', 't', 'stop']],
    ['Straße ΟΔΟΣ ＦＵＬＬ ﬁne', ['strasse', 'οδος', 'full', 'fine']],
    ['日本語です abc', ['日', '本', '語', 'で', 'す', 'abc']],
    ['a_b 50% x\u0000y \ud800z', ['a', 'b', '50', 'x', 'y', 'z']],
    ['', []],
  ])('%j', (text, expected) => {
    expect(tokenize(text)).toEqual(expected)
  })

  // The ASCII fast paths must find exactly what the Unicode paths find: a non-ASCII word appended
  // forces the slow path, and only adds its own token.
  const asciiText = fc.string({
    unit: fc.constantFrom(...'aZ09 #@$_-&/.:'.split(''), 'http://x.io/a', 'Bob'),
    maxLength: 40,
  })
  it('ASCII fast paths agree with the Unicode paths', () => {
    fc.assert(
      fc.property(asciiText, (text) => {
        expect([...tokenize(text), 'é']).toEqual(tokenize(`${text} é`))
        const fast = searchTerms({ text })
        const slow = searchTerms({ text: `${text} é` })
        expect(slow.filter((t) => t !== 'é')).toEqual(fast.filter((t) => t !== 'é'))
      }),
      { numRuns: 1000 },
    )
  })
})

describe('searchTerms', () => {
  it('words in order, URL tokens per URL, then entities and flags', () => {
    expect(
      searchTerms({
        text: 'RT @Bob: #Hi $TSLA https://t.co/x',
        lang: 'EN',
        entities: {
          urls: [{ url: 'https://t.co/x', expanded_url: 'https://Ex.com/p' }],
          hashtags: [{ tag: 'Hi' }],
          mentions: [{ username: 'bob' }],
        },
        attachments: { media_keys: ['3_1'] },
        referenced_tweets: [{ type: 'quoted', id: '1' }],
      }),
    ).toEqual([
      'rt',
      'bob',
      'hi',
      'tsla',
      'https',
      't',
      'co',
      'x',
      '/',
      '/https',
      '/ex',
      '/com',
      '/p',
      '/',
      '/https',
      '/t',
      '/co',
      '/x',
      '/',
      '/https',
      '/t',
      '/co',
      '/x',
      '#hi',
      'has:hashtags',
      '@bob',
      'has:mentions',
      '$tsla',
      'has:cashtags',
      'has:links',
      'has:media',
      'is:quote',
      'lang:en',
    ])
  })

  it('is total over odd shapes', () => {
    expect(
      searchTerms({ text: 'x', entities: { urls: 'no', hashtags: [null, { tag: 5 }] } }),
    ).toEqual(['x'])
    expect(searchTerms({})).toEqual([])
  })
})
