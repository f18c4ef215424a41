import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { build } from 'esbuild'
import { viewerDistDir, VIEWER_FILES, type ViewerFile } from './index.js'

/**
 * Bundles the browser code (client/) into dist/viewer.js and dist/viewer.css: the package's
 * `build` script, and what tests call when the bundle is missing. esbuild is a development
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

/** Builds the bundle unless every file of it is there (tests; `pnpm start` from the sources). */
export async function ensureViewerBuilt(): Promise<void> {
  const names = Object.keys(VIEWER_FILES) as ViewerFile[]
  if (names.every((name) => existsSync(`${viewerDistDir}${name}`))) return
  await buildViewer()
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const files = await buildViewer()
  process.stdout.write(`built ${files.join(', ')}\n`)
}
