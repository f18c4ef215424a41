import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { dirname, isAbsolute, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '../../..')

/**
 * A file of the team's `shared/` folder (X's OpenAPI document, the stand-in image script). Where CI
 * lays it out, `shared/` is beside the checkout; the environment variable `envVar` names another
 * place; and a clone of a local checkout (`git clone . /tmp/c`, as a pre-submit check does) finds it
 * beside its origin. Returns the first place that exists (or the first tried) and every place tried.
 */
export function findSharedFile(
  relative: string,
  envVar?: string,
): { path: string; tried: string[] } {
  const tried: string[] = []
  const given = envVar ? process.env[envVar] : undefined
  if (given) tried.push(given)
  tried.push(join(REPO_ROOT, '..', 'shared', relative))
  try {
    const origin = execFileSync('git', ['config', '--get', 'remote.origin.url'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    }).trim()
    if (origin !== '' && isAbsolute(origin) && existsSync(origin))
      tried.push(join(origin, '..', 'shared', relative))
  } catch {
    // not a git checkout, or no origin: the places above are all there is
  }
  return { path: tried.find((p) => existsSync(p)) ?? tried[0]!, tried }
}
