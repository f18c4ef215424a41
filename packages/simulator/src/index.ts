export * from './simulator.js'
export * from './from-config.js'
export { createWorld, type World, type WorldOptions, type SimPost, type SimUser } from './world.js'
export {
  RuleStore,
  compileConversationRule,
  queryCompiler,
  type CompiledRule,
  type RuleCompiler,
} from './rules.js'
export type { Faults, FailNextOptions, MalformedKind, Deliveries, Route } from './stream.js'
export { Prng } from './prng.js'
