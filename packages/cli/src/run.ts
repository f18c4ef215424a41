import { parseArgs } from 'node:util'
import { ConfigError, loadConfig, type Config } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { appsCommand } from './commands/apps.js'
import { exportCommand } from './commands/export.js'
import { importFiles, printSummary } from './commands/import.js'
import { migrate } from './commands/migrate.js'
import { partitionsCommand } from './commands/partitions.js'
import { rulesCommand } from './commands/rules.js'
import { secretCommand } from './commands/secret.js'
import { simulate } from './commands/simulate.js'
import { parseRoles, start, type RoleTuning } from './commands/start.js'
import { webhooksCommand } from './commands/webhooks.js'
import { describeFailure } from './failure.js'
import { err, UsageError } from './output.js'
import { createTerminal } from './terminal.js'

const HELP = `threadline — keeps whole conversations from X

usage: threadline <command> [options]

  migrate                          bring the database schema to the latest version
  partitions                       create the next days' partitions; drop expired ones (POSTS_RETENTION_DAYS)
  apps create --name NAME          create a client app; prints {"app_id","bearer_token","consumer_secret"}
  rules add|list|delete --app ID   manage an app's stream rules
  secret rotate                    a new pagination-token secret (the previous one still verifies)
  import FILE… [--no-wait]         feed NDJSON files (stream lines, search/lookup pages, twarc2) through the queue
  export ID [--format jsonl|csv|graphml] [--out FILE]
                                   write a conversation as a file, in tree order (stdout without --out)
  export --metrics [--app ID] [--out FILE]
                                   a CSV row of metrics per followed conversation (of one app with --app)
  start [--roles a,b] [--migrate] [--simulate] [--demo]
                                   run roles in this process (default: all; the simulator too when
                                   UPSTREAM_URL is unset); --demo is what "pnpm start" runs
  simulate                         run the synthetic X upstream alone
  webhooks failures [--app ID]     list parked webhook deliveries (one JSON object per line)
  webhooks replay ID…              re-send parked deliveries

Configuration comes from the environment (see docs/configuration.md).`

/** The configuration main() loaded, for describing a failure (undefined if it never loaded). */
let loaded: Config | undefined

async function main(argv: string[], tuning: RoleTuning): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      app: { type: 'string' },
      tag: { type: 'string' },
      roles: { type: 'string' },
      migrate: { type: 'boolean', default: false },
      demo: { type: 'boolean', default: false },
      simulate: { type: 'boolean', default: false },
      'no-wait': { type: 'boolean', default: false },
      format: { type: 'string' },
      out: { type: 'string' },
      metrics: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  })
  const [command, ...args] = positionals
  if (!command || values.help || command === 'help') {
    err(HELP)
    return
  }
  const config = loadConfig()
  loaded = config
  // `start` on a terminal is watched by a person: readable lines and a status line, not JSON.
  const terminal =
    command === 'start' && process.stdout.isTTY ? createTerminal(process.stdout) : undefined
  const logger = createLogger({
    level: command === 'start' || command === 'simulate' ? config.LOG_LEVEL : 'warn',
    name: command,
    destination: terminal?.destination,
  })
  switch (command) {
    case 'migrate':
      return migrate(config)
    case 'partitions':
      return partitionsCommand(config)
    case 'apps':
      return appsCommand(config, args, values)
    case 'rules':
      return rulesCommand(config, args, values)
    case 'secret':
      return secretCommand(config, args)
    case 'import':
      printSummary(await importFiles(config, logger, args, { wait: !values['no-wait'] }))
      return
    case 'export':
      return exportCommand(config, args, values)
    case 'start':
      return start(
        config,
        logger,
        {
          roles: parseRoles(values.roles),
          migrate: values.migrate,
          simulate: values.simulate,
          demo: values.demo,
        },
        tuning,
        terminal,
      )
    case 'simulate':
      return simulate(config, logger, tuning.simulator)
    case 'webhooks':
      return webhooksCommand(config, logger, args, values)
    default:
      throw new UsageError(`unknown command "${command}"\n\n${HELP}`)
  }
}

/**
 * Runs the `threadline` command with `argv` (without node and the script), setting the process's
 * exit code. `tuning` is for tests that run roles as processes with shorter timings.
 */
export async function runCli(argv: string[], tuning: RoleTuning = {}): Promise<void> {
  await main(argv, tuning).catch((error: unknown) => {
    if (error instanceof UsageError || error instanceof ConfigError) {
      err(error.message)
      process.exitCode = 2
    } else if ((error as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
      err((error as Error).message)
      process.exitCode = 2
    } else {
      err(`threadline: ${describeFailure(error, loaded)}`)
      process.exitCode = 1
    }
  })
}
