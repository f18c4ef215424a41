export { importFiles, type ImportSummary } from './commands/import.js'
export { ROLES, parseRoles } from './commands/start.js'
export { runCli } from './run.js'
export type { RoleTuning } from './commands/start.js'
