export * from './writer.js'
export * from './from-config.js'
export * from './store-lines.js'
export * from './partition-maintenance.js'
