import { describe, expect, it } from 'vitest'
import { conversationIdOfRule } from './conversation-rule.js'

describe('conversationIdOfRule', () => {
  it('reads a lone conversation_id term', () => {
    expect(conversationIdOfRule('conversation_id:1234567890123456789')).toBe('1234567890123456789')
    expect(conversationIdOfRule(' conversation_id:42 ')).toBe('42')
  })

  it('ignores other rules and ids out of range', () => {
    expect(conversationIdOfRule('conversation_id:12 lang:en')).toBeUndefined()
    expect(conversationIdOfRule('from:someone')).toBeUndefined()
    expect(conversationIdOfRule('conversation_id:9999999999999999999')).toBeUndefined()
    expect(conversationIdOfRule('conversation_id:abc')).toBeUndefined()
  })
})
