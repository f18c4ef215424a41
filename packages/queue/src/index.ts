export * from './connection.js'
export * from './queues.js'
export * from './stored-stream.js'
