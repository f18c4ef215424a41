import { describe, expect, it } from 'vitest'
import { createTerminal, renderLogLine } from './terminal.js'

describe('renderLogLine', () => {
  it('shows time, level, role/component, message and fields, not the JSON', () => {
    const line = JSON.stringify({
      level: 40,
      time: '2026-11-26T22:31:46.123Z',
      service: 'start',
      role: 'ingest',
      component: 'stream',
      attempt: 2,
      err: { message: 'socket hang up', stack: 'Error: …' },
      msg: 'stream dropped',
    })
    expect(renderLogLine(line, false)).toBe(
      '22:31:46 WARN  ingest/stream stream dropped attempt=2 err=socket hang up',
    )
  })

  it('names a role once when its component has the same name, and passes other text on', () => {
    const line = JSON.stringify({ level: 30, time: 'x', role: 'api', component: 'api', msg: 'up' })
    expect(renderLogLine(line, false)).toBe('info  api up')
    expect(renderLogLine('not json\n', false)).toBe('not json')
  })
})

describe('createTerminal', () => {
  it('prints log lines above the status line and redraws it after each', () => {
    const written: string[] = []
    const stream = {
      columns: 40,
      write: (chunk: string) => written.push(chunk),
    } as unknown as NodeJS.WriteStream
    const terminal = createTerminal(stream)
    terminal.status('● 12 Posts')
    terminal.destination.write(`${JSON.stringify({ level: 30, msg: 'hello' })}\n`)
    terminal.status('x'.repeat(100))
    terminal.clear()
    expect(written).toEqual([
      '\x1b[2K\r● 12 Posts',
      '\x1b[2K\rinfo  hello\n',
      '\x1b[2K\r● 12 Posts',
      `\x1b[2K\r${'x'.repeat(38)}…`,
      '\x1b[2K\r',
    ])
  })
})
