import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { ConnectionSlots } from '@threadline/redis'
import { ApiError } from '../errors.js'
import { StreamConnection, StreamRegistry, type DisconnectType } from './connection.js'

/**
 * StreamConnection and StreamRegistry against a fake response (no sockets): framing, keep-alives
 * on a fake clock, the slow-reader cut-off, close reasons, the per-app limit and shutdown.
 */
class FakeResponse extends EventEmitter {
  readonly chunks: string[] = []
  /** Bytes "queued in user space": grows with each write unless the fake reader drains. */
  writableLength = 0
  closed = false
  destroyed = false
  finished = false
  status: number | undefined
  headers: Record<string, unknown> | undefined
  /** A reader that keeps up: nothing stays queued. */
  draining = true
  /** Closes as soon as the response ends (a client that reads to the end). */
  closeOnEnd = true
  readonly socket = { setNoDelay: vi.fn() }

  write(chunk: string): boolean {
    this.chunks.push(chunk)
    if (!this.draining) this.writableLength += Buffer.byteLength(chunk)
    return true
  }
  end(chunk?: string): this {
    if (chunk !== undefined) this.chunks.push(chunk)
    this.finished = true
    if (this.closeOnEnd) this.close()
    return this
  }
  destroy(): this {
    this.destroyed = true
    this.close()
    return this
  }
  close(): void {
    if (this.closed) return
    this.closed = true
    this.emit('close')
  }
  writeHead(status: number, headers: Record<string, unknown>): this {
    this.status = status
    this.headers = headers
    return this
  }
  flushHeaders(): void {}
  /** Everything written, as the client would read it. */
  get text(): string {
    return this.chunks.join('')
  }
}

function fakeReply(res = new FakeResponse()): { reply: FastifyReply; res: FakeResponse } {
  const reply = {
    raw: res as unknown as ServerResponse,
    hijack: vi.fn(),
    getHeaders: () => ({ 'x-rate-limit-limit': '50', 'x-absent': undefined }),
  }
  return { reply: reply as unknown as FastifyReply, res }
}

const connection = (res: FakeResponse, options: Partial<{ maxBufferedBytes: number }> = {}) =>
  new StreamConnection('app-1', res as unknown as ServerResponse, {
    keepAliveMs: 1_000,
    maxBufferedBytes: options.maxBufferedBytes ?? 1_000_000,
    closeGraceMs: 500,
  })

beforeEach(() => {
  vi.useFakeTimers()
})
afterEach(() => {
  vi.useRealTimers()
})

/** X's operational-disconnect line with its default detail, framed. */
function disconnectLine(type: DisconnectType): string {
  const detail = {
    OperationalDisconnect:
      'This stream has been disconnected for operational reasons. Please reconnect.',
    SlowReader:
      'This stream has been disconnected because your client was unable to keep up with the rate of new data.',
    ConnectionPurged: 'This stream has been disconnected. Please reconnect.',
  }[type]
  const problem = 'https://api.twitter.com/2/problems/operational-disconnect'
  return (
    JSON.stringify({
      errors: [{ title: 'operational-disconnect', disconnect_type: type, detail, type: problem }],
    }) + '\r\n'
  )
}

describe('StreamConnection', () => {
  it('ends every message, object or JSON text, with \\r\\n', () => {
    const res = new FakeResponse()
    const conn = connection(res)
    expect(conn.send({ data: { id: '1' } })).toBe(true)
    expect(conn.send('{"data":{"id":"2"}}')).toBe(true)
    expect(res.text).toBe('{"data":{"id":"1"}}\r\n{"data":{"id":"2"}}\r\n')
    expect(conn.sent).toBe(2)
  })

  it('writes a bare \\r\\n only after a whole quiet interval', () => {
    const res = new FakeResponse()
    const conn = connection(res)
    vi.advanceTimersByTime(999)
    expect(res.chunks).toEqual([])
    vi.advanceTimersByTime(1)
    expect(res.chunks).toEqual(['\r\n'])
    // A message resets the interval: no keep-alive until 1 s after it.
    vi.advanceTimersByTime(600)
    conn.send({ n: 1 })
    vi.advanceTimersByTime(900)
    expect(res.chunks).toEqual(['\r\n', '{"n":1}\r\n'])
    vi.advanceTimersByTime(100)
    expect(res.chunks).toEqual(['\r\n', '{"n":1}\r\n', '\r\n'])
    vi.advanceTimersByTime(3_000)
    expect(res.chunks.filter((c) => c === '\r\n')).toHaveLength(5)
    expect(conn.sent).toBe(1)
  })

  it('cuts off a reader that does not drain, with the SlowReader line, then drops it', async () => {
    const res = new FakeResponse()
    res.draining = false
    res.closeOnEnd = false // the reader does not read, so `end` never finishes
    const bound = 150
    const conn = connection(res, { maxBufferedBytes: bound })
    const line = { data: 'x'.repeat(40) } // 53 bytes framed
    let maxBuffered = 0
    let sends = 0
    // One message every 100 ms: however the connection judges slowness (at once past the bound,
    // or past it for a while), a reader that never drains is cut off, with memory bounded.
    while (conn.open && sends < 1_000) {
      conn.send(line)
      sends += 1
      maxBuffered = Math.max(maxBuffered, res.writableLength)
      vi.advanceTimersByTime(100)
    }
    expect(conn.open).toBe(false)
    expect(maxBuffered).toBeLessThan(10 * bound)
    expect(res.finished).toBe(true)
    expect(res.chunks.at(-1)).toBe(disconnectLine('SlowReader'))
    // Nothing more is written to a closed stream, keep-alives included.
    const written = res.chunks.length
    expect(conn.send(line)).toBe(false)
    vi.advanceTimersByTime(5_000)
    expect(res.chunks.length).toBe(written)
    // The grace to drain the last line is over: the socket is dropped.
    expect(res.destroyed).toBe(true)
    await expect(conn.closed).resolves.toBe('SlowReader')
  })

  it('drops a cut-off reader only after the close grace', () => {
    const res = new FakeResponse()
    res.closeOnEnd = false
    const conn = connection(res)
    conn.disconnect('SlowReader')
    expect(res.chunks).toEqual([disconnectLine('SlowReader')])
    vi.advanceTimersByTime(499)
    expect(res.destroyed).toBe(false)
    vi.advanceTimersByTime(1)
    expect(res.destroyed).toBe(true)
  })

  it('reports a client that left, once, to every listener, and stops its keep-alives', async () => {
    const res = new FakeResponse()
    const conn = connection(res)
    const a = vi.fn()
    const b = vi.fn()
    conn.onClose(() => {
      throw new Error('a failing listener')
    })
    conn.onClose(a)
    conn.onClose(b)
    res.close()
    res.emit('close')
    await expect(conn.closed).resolves.toBe('client')
    expect(a).toHaveBeenCalledTimes(1)
    expect(a).toHaveBeenCalledWith('client')
    expect(b).toHaveBeenCalledTimes(1)
    expect(conn.open).toBe(false)
    vi.advanceTimersByTime(5_000)
    expect(res.chunks).toEqual([])
    // A listener added afterwards still hears about it.
    const late = vi.fn()
    conn.onClose(late)
    await Promise.resolve()
    expect(late).toHaveBeenCalledWith('client')
  })

  it('frames the operational-disconnect line as X does', () => {
    const res = new FakeResponse()
    connection(res).disconnect('SlowReader', 'why')
    const [line] = res.chunks
    expect(line!.indexOf('\n')).toBe(line!.length - 1)
    expect(line!.endsWith('\r\n')).toBe(true)
    expect(JSON.parse(line!)).toEqual({
      errors: [
        {
          title: 'operational-disconnect',
          disconnect_type: 'SlowReader',
          detail: 'why',
          type: 'https://api.twitter.com/2/problems/operational-disconnect',
        },
      ],
    })
  })
})

describe('StreamRegistry', () => {
  const registry = (slots?: ConnectionSlots) =>
    new StreamRegistry({
      kind: 'test',
      maxPerApp: 1,
      keepAliveMs: 1_000,
      maxBufferedBytes: 1_000_000,
      closeGraceMs: 500,
      slots,
    })

  it('takes the reply over and sends 200 with JSON headers and the headers set so far', async () => {
    const r = registry()
    const { reply, res } = fakeReply()
    const conn = await r.open(reply, 'a')
    expect((reply as unknown as { hijack: () => void }).hijack).toHaveBeenCalled()
    expect(res.status).toBe(200)
    expect(res.headers).toEqual({
      'x-rate-limit-limit': '50',
      'content-type': 'application/json; charset=utf-8',
      'cache-control': 'no-cache',
      'x-accel-buffering': 'no',
    })
    expect(res.socket.setNoDelay).toHaveBeenCalledWith(true)
    expect([...r.connections('a')]).toEqual([conn])
    expect(r.size).toBe(1)
  })

  it('refuses a second connection of one app with 429 TooManyConnections, not another app', async () => {
    const r = registry()
    const idle = vi.fn()
    r.onAppIdle(idle)
    const first = fakeReply()
    await r.open(first.reply, 'a')
    const second = fakeReply()
    const err = await r.open(second.reply, 'a').catch((e: unknown) => e)
    expect(err).toBeInstanceOf(ApiError)
    expect((err as ApiError).status).toBe(429)
    expect((err as ApiError).body).toMatchObject({
      title: 'ConnectionException',
      connection_issue: 'TooManyConnections',
    })
    expect(second.res.status).toBeUndefined() // nothing written: Fastify answers the 429
    await r.open(fakeReply().reply, 'b')
    first.res.close()
    await Promise.resolve()
    expect(idle).toHaveBeenCalledWith('a')
    expect(r.connections('a').size).toBe(0)
    await r.open(fakeReply().reply, 'a')
  })

  it('counts through shared slots when given, and gives the slot back on close', async () => {
    const release = vi.fn(async () => {})
    let free = 1
    const slots: ConnectionSlots = {
      acquire: vi.fn(async () => (free-- > 0 ? release : undefined)),
      close: vi.fn(),
    }
    const r = registry(slots)
    const { reply, res } = fakeReply()
    await r.open(reply, 'a')
    expect(slots.acquire).toHaveBeenCalledWith('test:a', 1)
    const err = await r.open(fakeReply().reply, 'a').catch((e: unknown) => e)
    expect((err as ApiError).status).toBe(429)
    res.close()
    await Promise.resolve()
    expect(release).toHaveBeenCalledTimes(1)
  })

  it('on shutdown sends OperationalDisconnect to every stream, waits for them, and refuses new ones', async () => {
    const r = registry()
    const a = fakeReply()
    const b = fakeReply()
    b.res.closeOnEnd = false // a client that does not drain: dropped after the grace
    await r.open(a.reply, 'a')
    await r.open(b.reply, 'b')
    let done = false
    const closing = r.closeAll().then(() => (done = true))
    await Promise.resolve()
    for (const res of [a.res, b.res]) {
      expect(res.chunks.at(-1)).toBe(disconnectLine('OperationalDisconnect'))
    }
    expect(done).toBe(false)
    vi.advanceTimersByTime(500)
    await closing
    expect(b.res.destroyed).toBe(true)
    expect(r.size).toBe(0)
    const err = await r.open(fakeReply().reply, 'c').catch((e: unknown) => e)
    expect((err as ApiError).status).toBe(503)
  })
})
