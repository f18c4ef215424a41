import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { viewerDistDir, VIEWER_FILES } from './index.js'

/**
 * Bundles the browser code (client/) into dist/viewer.js and dist/viewer.css: the package's
 * `build` script (`pnpm build`, `pnpm start`), and what the browser tests call first. esbuild is a development
 * dependency only: the image serves what this wrote.
 */
const clientDir = fileURLToPath(new URL('../client/', import.meta.url))

export async function buildViewer(): Promise<string[]> {
  await build({
    entryPoints: [
      { in: `${clientDir}main.ts`, out: 'viewer' },
      { in: `${clientDir}viewer.css`, out: 'viewer' },
    ],
    outdir: viewerDistDir,
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome111', 'firefox115', 'safari16'],
    minify: true,
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
  })
  return Object.keys(VIEWER_FILES).map((name) => `${viewerDistDir}${name}`)
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = await buildViewer()
  process.stdout.write(`built ${files.join(', ')}\n`)
}
