import { Command } from 'ioredis'
import type { Redis } from './connection.js'

/** An argument of a prepared command: text, bytes, or bytes in parts that go as one argument. */
export type PreparedArg = string | Buffer | readonly Buffer[]

const CRLF = Buffer.from('\r\n')

function argBytes(arg: PreparedArg): number {
  if (typeof arg === 'string') return Buffer.byteLength(arg, 'utf8')
  if (Buffer.isBuffer(arg)) return arg.length
  let n = 0
  for (const part of arg as readonly Buffer[]) n += part.length
  return n
}

/**
 * A command's request in Redis's protocol (RESP: `*<count>`, then `$<length>` and the bytes of
 * each argument), made in one buffer of its exact size.
 */
export function requestBytes(args: readonly PreparedArg[]): Buffer {
  const lengths = args.map(argBytes)
  const heads = lengths.map((length) => `$${length}\r\n`)
  const head = `*${args.length}\r\n`
  let size = head.length
  for (let i = 0; i < args.length; i++) size += heads[i]!.length + lengths[i]! + 2
  const out = Buffer.allocUnsafe(size)
  let at = out.write(head, 0, 'latin1')
  args.forEach((arg, i) => {
    at += out.write(heads[i]!, at, 'latin1')
    if (typeof arg === 'string') at += out.write(arg, at, 'utf8')
    else if (Buffer.isBuffer(arg)) at += arg.copy(out, at)
    else for (const part of arg as readonly Buffer[]) at += part.copy(out, at)
    at += CRLF.copy(out, at)
  })
  return out
}

/**
 * A command whose request is made ahead, in one buffer, and written as it is.
 *
 * ioredis copies every argument of a command with a Buffer among them into a new buffer of the
 * whole request, and a pipeline copies its commands into yet another: a batch's `stored` bodies
 * (≈ 1.2 MB) went through two fresh allocations after their own, each freshly faulted memory on a
 * VM. Made here, a body given in parts is copied once, into the request.
 *
 * ioredis reads only the command's name and its key (`args[keyIndex]`), to route it in a cluster;
 * the key must be text, and the connection must not have a `keyPrefix` (sendPrepared refuses one;
 * Threadline sets none: its keys carry REDIS_PREFIX themselves). Resolves with the reply as
 * ioredis decodes it.
 */
export class PreparedCommand extends Command {
  private readonly request: Buffer

  constructor(name: string, args: readonly PreparedArg[], keyIndex = 0) {
    const key = args[keyIndex]
    if (typeof key !== 'string') throw new TypeError(`${name}: the key must be text`)
    super(name, [key])
    this.request = requestBytes([name, ...args])
  }

  override toWritable(): Buffer {
    return this.request
  }
}

/**
 * Sends a prepared command on `redis`; resolves with its reply. Refuses a connection with a
 * `keyPrefix`: ioredis would prefix the routing key but not the prepared bytes, so the command
 * would write to the unprefixed key.
 */
export function sendPrepared<T = unknown>(redis: Redis, command: PreparedCommand): Promise<T> {
  if (redis.options.keyPrefix) {
    return Promise.reject(
      new Error(`a prepared ${command.name} cannot go through a connection with a keyPrefix`),
    )
  }
  void redis.sendCommand(command)
  return command.promise as Promise<T>
}
