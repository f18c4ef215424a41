import { parseArgs } from 'node:util'
import { downstreamJobs } from './compliance/downstream-jobs.js'
import { log } from './lib/setup.js'

/**
 * pnpm bench compliance [--posts 1000000] [--ids 1000000] [--withdrawn-every 10]
 * Issue 45's two compliance figures, each part in its own file under compliance/ and registered
 * in `parts` below; the last line is one JSON object of every part's figures, `ratio` the worst
 * part's.
 *  - downstream jobs (compliance/downstream-jobs.ts): a client's batch compliance job over `ids`
 *    ids against a store of `posts` Posts, upload → complete → download (target < 30 s for 1 M),
 *    against the same check straight in Postgres.
 */
const { values } = parseArgs({
  options: {
    posts: { type: 'string', default: '1000000' },
    ids: { type: 'string', default: '1000000' },
    'withdrawn-every': { type: 'string', default: '10' },
  },
  strict: false,
})
const num = (v: unknown, d: number) => (typeof v === 'string' ? Number(v) : d)

const parts: Array<{ name: string; run: () => Promise<Record<string, unknown>> }> = [
  {
    name: 'downstream jobs',
    run: () =>
      downstreamJobs({
        posts: num(values.posts, 1_000_000),
        ids: num(values.ids, 1_000_000),
        withdrawnEvery: num(values['withdrawn-every'], 10),
      }),
  },
]

const figures: Record<string, unknown> = {}
const ratios: number[] = []
for (const part of parts) {
  log(`== compliance: ${part.name}`)
  const got = await part.run()
  log(JSON.stringify(got))
  Object.assign(figures, got)
  for (const [k, v] of Object.entries(got))
    if (k.endsWith('ratio') && typeof v === 'number') ratios.push(v)
}
console.log(JSON.stringify({ ...figures, ratio: Math.max(...ratios) }))
