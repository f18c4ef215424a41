import { describe, expect, it } from 'vitest'
import { forbiddenAddressReason } from './address-policy.js'
import { deriveCandidates, matchEvents } from './events.js'

describe('forbiddenAddressReason', () => {
  it('refuses loopback, private, link-local, metadata and mapped forms', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.5',
      '172.16.3.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.100.100.200',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00:ec2::254',
      '::ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
    ]) {
      expect(forbiddenAddressReason(a), a).toBeDefined()
    }
  })
  it('refuses every IPv6 form that embeds an IPv4 address it would refuse', () => {
    for (const a of [
      '::169.254.169.254',
      '::a9fe:a9fe',
      '::7f00:1',
      '::8.8.8.8',
      '0:0:0:0:0:ffff:7f00:1',
      '::ffff:0:a9fe:a9fe',
      '::ffff:0:10.0.0.1',
      '::FFFF:169.254.169.254',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b::8.8.8.8',
      '2002:a9fe:a9fe::1',
      '2001:0:4136:e378:8000:63bf:3fff:fdd2',
    ]) {
      expect(forbiddenAddressReason(a), a).toBeDefined()
    }
  })
  it('allows public addresses', () => {
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(forbiddenAddressReason(a), a).toBeUndefined()
    }
  })
})

describe('matchEvents', () => {
  const post = {
    id: '10',
    author_id: '1',
    in_reply_to_user_id: '2',
    quoted_author_ids: ['3'],
    mentioned_user_ids: ['4', '4'],
    text: 'Hello Big World',
    raw: { id: '10' },
  }
  const sub = (
    id: string,
    event_type: string,
    user: string | null,
    keyword: string | null = null,
  ) => ({
    id,
    app_id: '9',
    event_type,
    filter_user_id: user,
    filter_keyword: keyword,
    tag: null,
    webhook_id: null,
  })
  it('matches by event type, user id and keyword phrase, once per subscription', () => {
    const events = matchEvents(deriveCandidates([post], []), [
      sub('1', 'post.create', '1'),
      sub('2', 'post.reply.create', '2'),
      sub('3', 'post.quote.create', '3'),
      sub('4', 'post.mention.create', '4'),
      sub('5', 'post.create', null, 'big world'),
      sub('6', 'post.create', null, 'world big'),
      sub('7', 'post.create', '99'),
    ])
    expect(events.map((e) => e.subscription.id)).toEqual(['1', '5', '2', '3', '4'])
    expect(new Set(events.map((e) => e.event_uuid)).size).toBe(5)
    expect(
      matchEvents(deriveCandidates([post], []), [sub('1', 'post.create', '1')])[0]!.event_uuid,
    ).toBe(events[0]!.event_uuid)
  })
})
