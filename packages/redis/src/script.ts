import type { Redis } from './connection.js'

/** A one-key Lua script as a function: `(key, ...args)` resolves to the script's reply. */
export type ScriptCommand<R> = (key: string, ...args: Array<string | Buffer>) => Promise<R>

type Commands = Record<string, ScriptCommand<unknown> | undefined>

/**
 * A Lua script over one key, run as a command of this client: defined on first use under `name`
 * (ioredis then sends EVALSHA, and EVAL when Redis has lost the script) and shared by every caller
 * of that name on the client, so a script is loaded once per connection, not once per call.
 */
export function scriptCommand<R>(redis: Redis, name: string, lua: string): ScriptCommand<R> {
  const commands = redis as unknown as Commands
  if (typeof commands[name] !== 'function') redis.defineCommand(name, { numberOfKeys: 1, lua })
  return (key, ...args) => commands[name]!(key, ...args) as Promise<R>
}
