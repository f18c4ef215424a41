export { importFiles, type ImportSummary } from './commands/import.js'
export { ROLES, parseRoles } from './commands/start.js'
