import { describe, expect, it } from 'vitest'
import {
  complianceEventFromJobResult,
  complianceEventFromStream,
  complianceJobResultLine,
  complianceStreamBody,
} from './compliance.js'

const at = '2026-11-28T12:00:00.000Z'

describe('complianceEventFromStream', () => {
  it('reads each Post action, with its author, and writes it back in X shape', () => {
    const body = {
      data: {
        delete: {
          tweet: { id: '1460323737035677698', author_id: '2244994945' },
          event_at: '2021-07-06T18:40:40Z',
        },
      },
    }
    const e = complianceEventFromStream(body, at)
    expect(e).toEqual({
      kind: 'tweet',
      id: '1460323737035677698',
      authorId: '2244994945',
      action: 'delete',
      eventAt: '2021-07-06T18:40:40.000Z',
      receivedAt: at,
      source: 'stream',
    })
    expect(complianceStreamBody(e as never)).toEqual({
      data: {
        delete: {
          tweet: { id: '1460323737035677698', author_id: '2244994945' },
          event_at: '2021-07-06T18:40:40.000Z',
        },
      },
    })
  })

  it('reads withheld, tweet_edit and the user actions with their fields', () => {
    const withheld = complianceEventFromStream(
      {
        withheld: {
          tweet: { id: '5', author_id: '6' },
          withheld_in_countries: ['DE', 'DE', 'FR'],
          event_at: at,
        },
      },
      at,
    )
    expect(withheld).toMatchObject({ action: 'withheld', withheldInCountries: ['DE', 'FR'] })
    expect(complianceStreamBody(withheld as never)).toEqual({
      data: {
        withheld: {
          tweet: { id: '5', author_id: '6' },
          event_at: at,
          withheld_in_countries: ['DE', 'FR'],
        },
      },
    })
    const edit = complianceEventFromStream(
      {
        data: {
          tweet_edit: {
            tweet: { id: '9' },
            initial_tweet_id: '8',
            edit_tweet_ids: ['8', '9'],
            event_at: at,
          },
        },
      },
      at,
    )
    expect(complianceStreamBody(edit as never)).toEqual({
      data: {
        tweet_edit: {
          tweet: { id: '9' },
          event_at: at,
          initial_tweet_id: '8',
          edit_tweet_ids: ['8', '9'],
        },
      },
    })
    const scrub = complianceEventFromStream(
      { data: { scrub_geo: { user: { id: '7' }, up_to_tweet_id: '99', event_at: at } } },
      at,
    )
    expect(scrub).toMatchObject({ kind: 'user', id: '7', action: 'scrub_geo', upToTweetId: '99' })
    expect(complianceStreamBody(scrub as never)).toEqual({
      data: { scrub_geo: { user: { id: '7' }, event_at: at, up_to_tweet_id: '99' } },
    })
    for (const action of [
      'user_protect',
      'user_unprotect',
      'user_delete',
      'user_undelete',
      'user_suspend',
      'user_unsuspend',
    ]) {
      const e = complianceEventFromStream(
        { data: { [action]: { user: { id: '7' }, event_at: at } } },
        at,
      )
      expect(e).toMatchObject({ kind: 'user', id: '7', action })
      expect(complianceStreamBody(e as never)).toEqual({
        data: { [action]: { user: { id: '7' }, event_at: at } },
      })
    }
  })

  it('refuses malformed events with a reason', () => {
    const bad: unknown[] = [
      null,
      [],
      { errors: [{ title: 'x' }] },
      { data: {} },
      { data: { delete: { tweet: { id: 5 }, event_at: at } } },
      { data: { delete: { tweet: { id: '99999999999999999999' }, event_at: at } } },
      { data: { delete: { tweet: { id: '5' }, event_at: 'yesterday' } } },
      { data: { withheld: { tweet: { id: '5' }, withheld_in_countries: ['de'], event_at: at } } },
      { data: { scrub_geo: { user: { id: '5' }, event_at: at } } },
      { data: { favorite: { tweet: { id: '5' }, event_at: at } } },
      { data: { delete: { tweet: { id: '5' }, event_at: at }, drop: {} } },
    ]
    for (const body of bad) expect(complianceEventFromStream(body, at)).toHaveProperty('error')
  })
})

describe('complianceEventFromJobResult', () => {
  const line = (reason: string) =>
    JSON.stringify({
      id: '1460323737035677698',
      action: 'delete',
      created_at: '2021-11-15T19:08:05.000Z',
      redacted_at: '2021-11-16T01:00:00.000Z',
      reason,
    })

  it('maps reasons to actions, with redacted_at as event_at', () => {
    expect(complianceEventFromJobResult('tweet', line('deleted'), at)).toEqual({
      kind: 'tweet',
      id: '1460323737035677698',
      action: 'delete',
      reason: 'deleted',
      eventAt: '2021-11-16T01:00:00.000Z',
      receivedAt: at,
      source: 'job',
    })
    expect(complianceEventFromJobResult('tweet', line('protected'), at)).toMatchObject({
      action: 'drop',
      reason: 'protected',
    })
    expect(complianceEventFromJobResult('tweet', line('scrub_geo'), at)).toMatchObject({
      action: 'scrub_geo',
    })
    expect(complianceEventFromJobResult('user', JSON.parse(line('suspended')), at)).toMatchObject({
      kind: 'user',
      action: 'user_suspend',
    })
    expect(complianceEventFromJobResult('user', line('deactivated'), at)).toMatchObject({
      action: 'user_delete',
    })
    expect(complianceEventFromJobResult('user', line('protected'), at)).toMatchObject({
      action: 'user_protect',
    })
  })

  it('refuses malformed lines', () => {
    for (const bad of [
      '{',
      '[]',
      '{"id":"1","reason":"deleted"}',
      '{"id":1,"reason":"deleted","redacted_at":"2021-11-16T01:00:00Z"}',
      '{"id":"1","reason":"Robot!","redacted_at":"2021-11-16T01:00:00Z"}',
    ]) {
      expect(complianceEventFromJobResult('tweet', bad, at)).toHaveProperty('error')
    }
    expect(complianceEventFromJobResult('user', line('scrub_geo'), at)).toHaveProperty('error')
  })

  it('a logged withdrawal reads back as the same result line', () => {
    const e = complianceEventFromJobResult('tweet', line('deleted'), at)
    expect(JSON.parse(complianceJobResultLine(e as never))).toEqual({
      id: '1460323737035677698',
      action: 'delete',
      created_at: '2021-11-15T19:08:05.069Z',
      redacted_at: '2021-11-16T01:00:00.000Z',
      reason: 'deleted',
    })
    expect(
      JSON.parse(
        complianceJobResultLine(
          { id: '7', action: 'user_suspend', eventAt: at },
          '2020-01-01T00:00:00.000Z',
        ),
      ),
    ).toEqual({
      id: '7',
      action: 'delete',
      created_at: '2020-01-01T00:00:00.000Z',
      redacted_at: at,
      reason: 'suspended',
    })
  })
})
