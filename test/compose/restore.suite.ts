import { chmodSync, mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { beforeAll, describe, expect, it } from 'vitest'
import { generateConversation, waitFor, waitForValue } from '@threadline/testing'
import { Compose, complaints, type Complaint } from './compose.js'
import { requireDocker, SuiteRun } from './suite-run.js'

/**
 * The restore runbook of docs/operations.md, run for real (`pnpm test:compose`): Postgres with its
 * backup service, Redis, migrate and a writer from docker-compose.yml under a project name of its
 * own; batches of Posts imported through the `posts` queue and the writer (`threadline import`),
 * a backup taken by hand between them, the time noted from the database's clock after a marker
 * batch, more Posts written after it; then the stack taken down, the repository restored to that
 * time into a fresh volume (PGDATA_VOLUME), Postgres started on it, and exactly the Posts committed
 * before the time found there. Everything, volumes too, is removed at the end; the logs are kept
 * only when something failed.
 */

const PROJECT = 'threadline-restore-test'
const RESTORED_VOLUME = `${PROJECT}_pgdata_restored`
/** Posts per imported batch: one conversation each. */
const BATCH_SIZE = 300

/** Lines that read as warnings but are the image's, not ours (as in compose.suite.ts). */
const NOT_OURS = [
  /initdb: warning: enabling "trust" authentication for local connections/,
  /FATAL: {2}terminating autovacuum process due to administrator command/,
  /FATAL: {2}the database system is shutting down/,
  /FATAL: {2}the database system is (starting up|not yet accepting connections)/,
]

interface Batch {
  name: string
  ids: string[]
}

interface BackupInfo {
  backup?: { label: string; type: string }[]
}

describe('backups: a point-in-time restore into a fresh volume', () => {
  const suite = new SuiteRun('restore')
  const importDir = join(suite.workDir, 'import')
  // The stack as deployed, and the same stack pointed at the restored volume.
  const compose = new Compose(PROJECT, suite.emptyEnv)
  const restored = new Compose(PROJECT, suite.emptyEnv, { PGDATA_VOLUME: RESTORED_VOLUME })
  const timings = suite.timings

  /** Writes a batch's lines for the import container, which runs as another user. */
  const batch = (name: string, seed: number, startMs: number): Batch => {
    const conversation = generateConversation({ size: BATCH_SIZE, seed, startMs })
    writeFileSync(join(importDir, `${name}.jsonl`), conversation.lines.join('\n') + '\n')
    chmodSync(join(importDir, `${name}.jsonl`), 0o644)
    return { name, ids: conversation.ids }
  }

  /** `threadline import` in a one-off container: through the `posts` queue to the writer service. */
  const store = async (b: Batch) => {
    const args = ['run', '--rm', '--no-deps', '-T', '-v', `${importDir}:/import:ro`, 'api']
    await compose.run([...args, 'import', `/import/${b.name}.jsonl`], 180_000)
  }

  const postIds = async (stack: Compose) =>
    (await stack.sql('SELECT id FROM posts ORDER BY id')).map((r) => r[0]!)

  const backups = async (stack: Compose) => {
    const { stdout } = await stack.run([
      'exec',
      '-T',
      'backup',
      'pgbackrest',
      'info',
      '--output=json',
    ])
    return (JSON.parse(stdout) as BackupInfo[])[0]?.backup ?? []
  }

  const down = async (stack: Compose) =>
    (await stack.run(['down', '--volumes', '--remove-orphans', '--timeout', '10'], 180_000)).ms

  beforeAll(async () => {
    await requireDocker()
    // A run that was itself killed leaves its stack, and perhaps its restored volume, behind.
    await down(restored)
    await down(compose)
    await suite.step(async () => {
      timings.build_ms = (await compose.run(['build'], 900_000)).ms
      const up = ['up', '--detach', '--wait', '--no-build', 'postgres', 'backup', 'redis', 'writer']
      timings.up_to_healthy_ms = (await compose.run(up, 300_000)).ms
    })
    // The import container runs as the image's `node` user.
    mkdirSync(importDir)
    chmodSync(importDir, 0o755)
  }, 900_000)

  suite.registerEnd(restored, async () => (await down(restored)) + (await down(compose)), 400_000)

  it('finds exactly the Posts committed before the noted time, and archives again after', async () => {
    // The service's first full backup, taken once the server was up.
    const first = await waitForValue(
      'the first full backup',
      async () => (await backups(compose)).find((b) => b.type === 'full'),
      { timeoutMs: 120_000, intervalMs: 1_000 },
    )
    expect(first.label).toMatch(/F$/)

    const hour = 3_600_000
    const start = Date.now() - 3 * hour
    const before = batch('before', 1, start)
    const marker = batch('marker', 2, start + hour)
    const after = batch('after', 3, start + 2 * hour)

    await store(before)
    expect(await postIds(compose)).toEqual([...before.ids].sort(byId))
    // A backup by hand, as the runbook takes one: incremental on the first full.
    const incr = await compose.run(['exec', '-T', 'backup', 'pgbackrest', 'backup', '--type=incr'])
    timings.incremental_backup_ms = incr.ms
    expect((await backups(compose)).map((b) => b.type)).toEqual(['full', 'incr'])

    await store(marker)
    // The time to restore to, from the database's clock, once the marker batch is committed.
    const [[target]] = (await compose.sql('SELECT now()')) as [[string]]
    await store(after)
    const all = [...before.ids, ...marker.ids, ...after.ids].sort(byId)
    expect(await postIds(compose)).toEqual(all)
    // `pgbackrest check` switches WAL and waits for the segment to be archived: the repository
    // holds everything written so far, beyond the target.
    await compose.run(['exec', '-T', 'backup', 'pgbackrest', 'check'], 120_000)

    // The runbook: the stack down (volumes kept), a restore into a fresh volume, Postgres on it.
    const found: Complaint[] = []
    const collect = async (stack: Compose) => {
      for (const [container, log] of await stack.logs()) {
        // Postgres and its backups: the other services' logs are compose.suite.ts's to judge.
        if (/-(postgres|backup)-/.test(container)) found.push(...complaints(container, log))
      }
    }
    await compose.run(['stop', '--timeout', '30'], 180_000)
    await collect(compose)
    await compose.run(['down'], 180_000)
    const restore = await restored.run(
      [
        ...['run', '--rm', '--no-deps', '-T', 'backup', 'pgbackrest', 'restore'],
        ...['--type=time', `--target=${target}`, '--target-action=promote'],
      ],
      300_000,
    )
    timings.restore_ms = restore.ms
    const started = Date.now()
    await restored.run(['up', '--detach', '--wait', '--no-build', 'postgres'], 300_000)
    // Healthy answers during recovery too (read-only): the restore is done once it is promoted.
    await waitFor(
      'the restored cluster promoted',
      async () => {
        const [[inRecovery]] = (await restored.sql('SELECT pg_is_in_recovery()')) as [[string]]
        return inRecovery === 'f' || 'still in recovery'
      },
      { timeoutMs: 300_000, intervalMs: 500 },
    )
    timings.recovery_ms = Date.now() - started

    const kept = await postIds(restored)
    const expected = [...before.ids, ...marker.ids].sort(byId)
    expect(kept.length, 'Posts in the restored store').toBe(expected.length)
    expect(kept).toEqual(expected)
    const [[conversations]] = (await restored.sql(
      `SELECT string_agg(post_count::text, ',' ORDER BY id) FROM conversations`,
    )) as [[string]]
    expect(conversations).toBe(`${BATCH_SIZE},${BATCH_SIZE}`)

    // The restored cluster, on its new timeline, archives into the same repository.
    await restored.run(['up', '--detach', '--wait', '--no-build', 'backup'], 300_000)
    await restored.run(['exec', '-T', 'backup', 'pgbackrest', 'check'], 120_000)

    // No archive command failed, no backup warned, before the restore or after it.
    await collect(restored)
    const ours = found.filter((c) => !NOT_OURS.some((line) => line.test(c.line)))
    expect(ours.map((c) => `${c.container}: ${c.line.slice(0, 300)}`)).toEqual([])
  })
})

/** Snowflake ids in numeric order, as `ORDER BY id` gives them. */
function byId(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0)
}
