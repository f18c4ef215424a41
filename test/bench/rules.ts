/**
 * `pnpm bench rules`: how fast the rule index finds the stream rules a Post matches.
 * 100k `conversation_id:` rules + 1k keyword rules, 100k Posts. Baseline: every rule's predicate
 * tested in a loop (on a sample of Posts, scaled), in the same run. Last line: one JSON object.
 */
import { performance } from 'node:perf_hooks'
import type { WirePost } from '@threadline/domain'
import { RuleIndex, compileView, parseQuery, viewOf, type Ast } from '@threadline/query'

const CONVERSATION_RULES = 100_000
const KEYWORD_RULES = 1_000
const POSTS = 100_000
const BASELINE_SAMPLE = 500

// A deterministic generator (mulberry32), so runs compare.
let seed = 42
const rand = (n: number): number => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return Math.floor((((t ^ (t >>> 14)) >>> 0) / 4_294_967_296) * n)
}

const VOCAB = Array.from({ length: 5_000 }, (_, i) => `w${i.toString(36)}x`)
const parse = (q: string): Ast => {
  const r = parseQuery(q)
  if (!r.ok) throw new Error(`${q}: ${r.errors.join(', ')}`)
  return r.ast
}

const t0 = performance.now()
const rules: Array<{ id: string; ast: Ast }> = []
for (let i = 0; i < CONVERSATION_RULES; i += 1) {
  rules.push({ id: `c${i}`, ast: parse(`conversation_id:${1_000_000 + i * 7}`) })
}
for (let i = 0; i < KEYWORD_RULES; i += 1) {
  const a = VOCAB[rand(VOCAB.length)]!
  const b = VOCAB[rand(VOCAB.length)]!
  const q = [a, `"${a} ${b}"`, `${a} -${b}`, `(${a} OR ${b}) lang:en`, `#${a}`][i % 5]!
  rules.push({ id: `k${i}`, ast: parse(q) })
}
const index = new RuleIndex<string>()
for (const r of rules) index.add(r.id, r.ast, r.id)
console.log(`built ${index.size} rules in ${(performance.now() - t0).toFixed(0)} ms`)

const posts: WirePost[] = []
for (let i = 0; i < POSTS; i += 1) {
  const words = Array.from({ length: 12 + rand(20) }, () => VOCAB[rand(VOCAB.length)]!)
  const conv = rand(4) === 0 ? 1_000_000 + rand(CONVERSATION_RULES) * 7 : 900_000_000 + i
  posts.push({
    id: String(2_000_000_000 + i),
    text: words.join(rand(3) === 0 ? ' #' : ' '),
    author_id: String(10 + rand(1000)),
    conversation_id: String(conv),
    lang: rand(2) === 0 ? 'en' : 'fr',
  })
}

// Warm-up (JIT), untimed; the baseline below runs after it, equally warm.
for (let i = 0; i < 10_000; i += 1) index.match(posts[i]!)
let matched = 0
const t1 = performance.now()
for (const post of posts) matched += index.match(post).length
const indexSeconds = (performance.now() - t1) / 1000
const indexRate = POSTS / indexSeconds
console.log(
  `index: ${POSTS} Posts in ${indexSeconds.toFixed(2)} s, ${indexRate.toFixed(0)} Posts/s, ${matched} matches`,
)

// Baseline: each rule's own predicate on every Post (a sample, scaled: it is ~100k tests a Post).
// The Post is prepared once, as the index does, so only the rule lookup differs.
const predicates = rules.map((r) => compileView(r.ast))
let baseMatched = 0
let indexOnSample = 0
const t2 = performance.now()
for (let i = 0; i < BASELINE_SAMPLE; i += 1) {
  const view = viewOf(posts[i]!)
  for (const p of predicates) if (p(view)) baseMatched += 1
}
const baseSeconds = (performance.now() - t2) / 1000
const baseRate = BASELINE_SAMPLE / baseSeconds
for (let i = 0; i < BASELINE_SAMPLE; i += 1) indexOnSample += index.match(posts[i]!).length
if (indexOnSample !== baseMatched) {
  throw new Error(`index found ${indexOnSample} matches on the sample, the baseline ${baseMatched}`)
}
console.log(
  `baseline: ${BASELINE_SAMPLE} Posts in ${baseSeconds.toFixed(2)} s, ${baseRate.toFixed(1)} Posts/s (same ${baseMatched} matches)`,
)
console.log(
  JSON.stringify({
    rules: index.size,
    posts: POSTS,
    matches: matched,
    index_posts_per_s: Math.round(indexRate),
    baseline_posts_per_s: Math.round(baseRate * 10) / 10,
    baseline_sample: BASELINE_SAMPLE,
    ratio: Math.round((indexRate / baseRate) * 10) / 10,
  }),
)
