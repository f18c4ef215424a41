import type { Config } from '@threadline/config'
import { createDb, ensureDatabase, migrateToLatest } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { runUntilSignal, type Service } from '@threadline/runtime'
import { writerFromConfig } from '@threadline/writer'
import { UsageError } from '../output.js'

type RoleFactory = (config: Config, logger: Logger) => Promise<Service>

/** Every role `threadline start` can run; one codebase, several deployables. */
export const ROLES: Record<string, RoleFactory> = {
  writer: (config, logger) => writerFromConfig(config, logger.child({ role: 'writer' })),
}

export function parseRoles(value: string | undefined): string[] {
  const roles = value
    ? value
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean)
    : Object.keys(ROLES)
  const unknown = roles.filter((r) => !(r in ROLES))
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown role(s) ${unknown.join(', ')}; roles: ${Object.keys(ROLES).join(', ')}`,
    )
  }
  return roles
}

/** `threadline start [--roles …] [--migrate]`: runs the given roles in this process until a signal. */
export async function start(
  config: Config,
  logger: Logger,
  options: { roles: string[]; migrate: boolean },
): Promise<void> {
  if (options.migrate) {
    await ensureDatabase(config.DATABASE_URL)
    const db = createDb({
      url: config.DATABASE_URL,
      poolMax: 1,
      applicationName: 'threadline-migrate',
    })
    try {
      const applied = await migrateToLatest(db)
      if (applied.length) logger.info({ applied }, 'migrations applied')
    } finally {
      await db.destroy()
    }
  }
  const services: Service[] = []
  for (const role of options.roles) services.push(await ROLES[role]!(config, logger))
  logger.info({ roles: options.roles }, 'threadline started')
  await runUntilSignal(services, logger, config.SHUTDOWN_TIMEOUT_MS)
}
