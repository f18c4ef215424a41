export * from './server.js'
export * from './from-config.js'
export * from './errors.js'
export * from './params.js'
