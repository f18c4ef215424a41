import { compileConversationRule, createSimulator } from '@threadline/simulator'

/**
 * The simulator for `pnpm bench pipeline`, in its own process (as X is another machine): once the
 * ingest connects, it makes all `stopAfter` Posts at once and writes them as fast as the reader takes
 * them (`rate` is then no limit), and one extra rule value,
 * `bench:everything`, matches every Post so that the whole generated stream flows to the ingest.
 */
const rate = Number(process.argv[2] ?? 50_000)
const token = process.argv[3] ?? 'bench-token'
const stopAfter = Number(process.argv[4] ?? 50_000)
const sim = createSimulator({
  port: 0,
  rate,
  stopAfter,
  // Made and rendered before the first line is written: the upstream's work (X's, on other
  // machines) stays out of the time this 2-core machine measures.
  pregenerate: true,
  seed: 7,
  bearerToken: token,
  keepAliveMs: 5_000,
  slowReader: 'pause',
  recordDeliveries: false,
  world: { users: 20_000, historyPosts: 5_000, maxPosts: 200_000, demoConversations: 0 },
  compileRule: (value) =>
    value === 'bench:everything'
      ? { ok: true, rule: { test: () => true } }
      : compileConversationRule(value),
})
// Every Post of the world's history is older than this; every live one is not.
const liveFrom = new Date().toISOString()
await sim.start()
process.stdout.write(`${JSON.stringify({ url: sim.url, liveFrom })}\n`)
const stop = () => {
  const stats = sim.stats()
  void sim.close().then(() => {
    process.stderr.write(`simulator: generated ${stats.generated}, sent ${stats.sent.total}\n`)
  })
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
