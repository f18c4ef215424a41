/**
 * The `threadline` command for tests that run roles as separate processes: the same command, with
 * the per-role tuning given as JSON in THREADLINE_TEST_TUNING (shorter job locks, keep-alives, …),
 * which production keeps as constants.
 */
import { runCli, type RoleTuning } from '@threadline/cli'

const tuning = JSON.parse(process.env.THREADLINE_TEST_TUNING ?? '{}') as RoleTuning
await runCli(process.argv.slice(2), tuning)
