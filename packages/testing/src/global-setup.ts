import type { TestProject } from 'vitest/node'
import { resolveTestServices } from './services.js'

declare module 'vitest' {
  export interface ProvidedContext {
    databaseUrl: string
    redisUrl: string
    servicesMode: string
  }
}

/** Vitest globalSetup: find (or start) Postgres and Redis once per run and hand their URLs on. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const services = await resolveTestServices()
  project.provide('databaseUrl', services.databaseUrl)
  project.provide('redisUrl', services.redisUrl)
  project.provide('servicesMode', services.mode)
  return () => services.stop()
}
