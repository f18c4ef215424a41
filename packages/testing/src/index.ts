export * from './env.js'
export * from './services.js'
export * from './wait.js'
export * from './fixtures.js'
