import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { lineSpans } from './json-spans.js'

const utf8 = (text: string) => Buffer.from(text, 'utf8')
const parse = (span: Uint8Array) => JSON.parse(Buffer.from(span).toString('utf8')) as unknown

/** Any JSON object, keys and strings of any text (quotes, backslashes, brackets, non-ASCII). */
const object = fc.dictionary(fc.string({ unit: 'binary' }), fc.jsonValue({ maxDepth: 3 }), {
  maxKeys: 5,
})

describe('lineSpans', () => {
  it("finds data's Posts and includes' users and tweets in any line, however it is spaced", () => {
    fc.assert(
      fc.property(
        fc.oneof(object, fc.array(object, { maxLength: 3 })),
        fc.array(object, { maxLength: 3 }),
        fc.array(object, { maxLength: 3 }),
        object,
        fc.constantFrom(undefined, 1, 2, '\t', '\r\n '),
        (data, users, tweets, other, space) => {
          const value = { other, data, includes: { tweets, other, users }, matching_rules: other }
          const line = JSON.stringify(value, null, space)
          // What the line says, not the generated values: JSON has no -0, so -0 is written as 0.
          const sent = JSON.parse(line) as typeof value
          const spans = lineSpans(utf8(line))
          expect(spans).toBeDefined()
          expect(spans!.data?.map(parse)).toEqual(
            Array.isArray(sent.data) ? sent.data : [sent.data],
          )
          expect(spans!.users?.map(parse)).toEqual(sent.includes.users)
          expect(spans!.tweets?.map(parse)).toEqual(sent.includes.tweets)
        },
      ),
    )
  })

  it('gives views of the bytes it was given, the objects exactly as written', () => {
    const line = utf8('{"data":{"id":"1","n":25.0,"t":"\\u00e9\\"}"} ,"includes":{"users":[ {} ]}}')
    const spans = lineSpans(line)!
    expect(Buffer.from(spans.data![0]!).toString()).toBe('{"id":"1","n":25.0,"t":"\\u00e9\\"}"}')
    expect(spans.data![0]!.buffer).toBe(line.buffer)
    expect(spans.users!.map((s) => Buffer.from(s).toString())).toEqual(['{}'])
    expect(spans.tweets).toBeUndefined()
  })

  it('takes the last of duplicate keys, as JSON.parse does', () => {
    const spans = lineSpans(
      utf8('{"data":{"id":"1"},"includes":{"users":[{"id":"2"}]},"data":{"id":"3"},"includes":{}}'),
    )!
    expect(spans.data!.map(parse)).toEqual([{ id: '3' }])
    expect(spans.users).toBeUndefined()
    expect(lineSpans(utf8('{"data":{"id":"1"},"data":7}'))!.data).toBeUndefined()
    const users = lineSpans(utf8('{"includes":{"users":[{}],"tweets":[{}],"users":null}}'))!
    expect(users.users).toBeUndefined()
    expect(users.tweets!.map(parse)).toEqual([{}])
  })

  it('gives up where it cannot be sure: escaped keys, no object at the top, trailing text, not UTF-8', () => {
    expect(lineSpans(utf8('{"d\\u0061ta":{"id":"1"}}'))).toBeUndefined()
    expect(lineSpans(utf8('{"includes":{"us\\u0065rs":[]}}'))).toBeUndefined()
    expect(lineSpans(utf8('[{"data":{}}]'))).toBeUndefined()
    expect(lineSpans(utf8('{"data":{}} x'))).toBeUndefined()
    const notUtf8 = Buffer.concat([utf8('{"data":{"text":"'), Buffer.from([0xff]), utf8('"}}')])
    expect(lineSpans(notUtf8)).toBeUndefined()
    expect(lineSpans(utf8('{"data":{"id":"1"'))).toBeUndefined()
    expect(lineSpans(utf8(' {"data":{}}\r\n'))!.data!.map(parse)).toEqual([{}])
  })
})
