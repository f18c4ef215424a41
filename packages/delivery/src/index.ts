export * from './delivery.js'
export * from './from-config.js'
