import { workerClients, type TestEnv } from '@threadline/testing'
import { loadConfig } from '@threadline/config'
import {
  createWriter,
  writerOptionsFromConfig,
  type Writer,
  type WriterOptions,
} from '@threadline/writer'

/** Production's writer options (the configuration's defaults), with a short shutdown for tests. */
export const testWriterOptions: WriterOptions = {
  ...writerOptionsFromConfig(loadConfig({})),
  shutdownTimeoutMs: 5_000,
}

/**
 * The real writer on its own clients, for a test file's schema and prefix; started, and closed
 * with the file's environment. Options default to production's, with a short shutdown.
 */
export async function startTestWriter(
  env: TestEnv,
  {
    redisUrl = env.redisUrl,
    options = {},
  }: { redisUrl?: string; options?: Partial<WriterOptions> } = {},
): Promise<Writer> {
  const writer = createWriter(
    workerClients(env, 'test-writer', { redisUrl, applicationName: `${env.schema}-writer` }),
    { ...testWriterOptions, prefix: env.prefix, ...options },
  )
  env.defer(() => writer.close())
  await writer.start()
  return writer
}
