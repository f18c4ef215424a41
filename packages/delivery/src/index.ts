export * from './delivery.js'
export * from './options.js'
export * from './from-config.js'
