import { createInterface } from 'node:readline'
import { compileConversationRule, createSimulator } from '@threadline/simulator'

/**
 * The simulator for `pnpm bench pipeline`, in its own process (as X is another machine). Once the
 * ingest reads its stream under a rule, it bursts `warmup` Posts (the pipeline's untimed warm-up);
 * on a `go` line on stdin it bursts the `measure` Posts the bench times. Each burst is made and
 * rendered before its first line is written, then written as fast as the reader takes it. One rule
 * value, `bench:everything`, matches every Post so that the whole stream flows to the ingest.
 *
 * Stdout, one JSON object a line: `{url, liveFrom}` once listening, `{warmup}` (Posts sent) after
 * the warm-up burst, and `{measuredFrom}` (no measured Post is older) as the measured burst starts.
 */
const token = process.argv[2] ?? 'bench-token'
const measure = Number(process.argv[3] ?? 50_000)
const warmup = Number(process.argv[4] ?? 5_000)
const sim = createSimulator({
  port: 0,
  // Posts only in bursts, none on a schedule.
  rate: 0,
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
const say = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`)
// Every Post of the world's history is older than this; every burst's is not.
const liveFrom = new Date().toISOString()
await sim.start()
say({ url: sim.url, liveFrom })

// A burst goes to the readers open when it starts: wait for the ingest's stream and the rule.
const reading = setInterval(() => {
  const stats = sim.stats()
  if (stats.streamConnections === 0 || stats.rules === 0) return
  clearInterval(reading)
  say({ warmup: sim.burst(warmup) })
}, 20)

const input = createInterface({ input: process.stdin })
input.on('line', (line) => {
  if (line.trim() !== 'go') return
  const atMs = Date.now()
  say({ measuredFrom: new Date(atMs).toISOString() })
  sim.burst(measure, atMs)
})

const stop = () => {
  const stats = sim.stats()
  // A run that ended before the ingest read (a role that failed to start) still has this timer.
  clearInterval(reading)
  input.close()
  void sim.close().then(() => {
    process.stderr.write(`simulator: generated ${stats.generated}, sent ${stats.sent.total}\n`)
  })
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
