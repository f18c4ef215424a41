export * from './writer.js'
export * from './from-config.js'
