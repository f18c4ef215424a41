import { describe, expect, it } from 'vitest'
import { COMPLIANCE_BATCH_MAX_EVENTS, complianceJobSchema } from '@threadline/queue'
import { ComplianceProducer } from './queue-compliance.js'

const event = {
  kind: 'tweet',
  id: '1460323737035677698',
  authorId: '2244994945',
  action: 'delete',
  eventAt: '2026-11-28T12:00:00.000Z',
  receivedAt: '2026-11-28T12:00:01.000Z',
  source: 'stream',
}

describe('compliance jobs', () => {
  it('cut events in jobs of at most COMPLIANCE_BATCH_MAX_EVENTS, named by their batch', () => {
    expect(ComplianceProducer.jobIds(1, 'b')).toEqual(['compliance-b-0'])
    expect(ComplianceProducer.jobIds(COMPLIANCE_BATCH_MAX_EVENTS, 'b')).toHaveLength(1)
    expect(ComplianceProducer.jobIds(COMPLIANCE_BATCH_MAX_EVENTS + 1, 'b')).toEqual([
      'compliance-b-0',
      'compliance-b-1',
    ])
    // BullMQ: a custom job id is never all digits and holds no ':'.
    for (const id of ComplianceProducer.jobIds(2_500, 'sweep-146'))
      expect(id).toMatch(/^[^:]*\D[^:]*$/)
  })

  it('take events with their edit and profile fields, and refuse what is not an event', () => {
    const edit = {
      ...event,
      action: 'tweet_edit',
      initialTweetId: '1460323737035677600',
      editTweetIds: ['1460323737035677600', '1460323737035677698'],
    }
    expect(complianceJobSchema.parse({ events: [event, edit] }).events[1]).toEqual(edit)
    for (const bad of [
      { events: [] },
      { events: [{ ...event, id: 1460323737 }] },
      { events: [{ ...event, action: 'like' }] },
      { events: [{ ...event, eventAt: 'yesterday' }] },
      { events: [{ ...event, source: 'rumour' }] },
    ]) {
      expect(complianceJobSchema.safeParse(bad).success, JSON.stringify(bad)).toBe(false)
    }
  })
})
