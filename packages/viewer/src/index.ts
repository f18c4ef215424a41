import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/**
 * The conversation viewer (docs/api.md §6): a page the API serves, and the bundle `pnpm build`
 * writes to this package's dist/ (src/build.ts). The bundle is found beside the sources, in
 * development and in the image alike (infra/build.ts keeps each module's own import.meta.url).
 */

/** Where `pnpm build` writes the viewer's files. */
export const viewerDistDir = fileURLToPath(new URL('../dist/', import.meta.url))

/** The files the page loads, by the name it asks for them under. */
export const VIEWER_FILES = {
  'viewer.js': 'text/javascript; charset=utf-8',
  'viewer.css': 'text/css; charset=utf-8',
  'viewer.js.map': 'application/json',
  'viewer.css.map': 'application/json',
} as const

export type ViewerFile = keyof typeof VIEWER_FILES

export interface ViewerAsset {
  body: Buffer
  contentType: string
}

export function isViewerFile(name: string): name is ViewerFile {
  return Object.hasOwn(VIEWER_FILES, name)
}

/** One built file, or undefined while the bundle is not built. */
export function readViewerFile(name: ViewerFile): ViewerAsset | undefined {
  try {
    return { body: readFileSync(`${viewerDistDir}${name}`), contentType: VIEWER_FILES[name] }
  } catch (err) {
    if ((err as { code?: string }).code === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Only this origin, for everything: no CDN, no remote fonts, and data calls back to this API only
 * (docs/api.md §6).
 */
export const VIEWER_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

/** The HTML of every viewer page; the script reads the path to know which one it is. */
export function viewerPage(assetBase: string, title: string): string {
  const escaped = title.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`)
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escaped}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${assetBase}/viewer.css">
<script type="module" src="${assetBase}/viewer.js"></script>
</head>
<body>
<a class="skip" href="#main">Skip to the conversation</a>
<header class="bar"><a class="brand" href="/threads">Threadline</a><span id="status" class="status" role="status" aria-live="polite"></span></header>
<main id="main" tabindex="-1"><noscript>This page needs JavaScript.</noscript></main>
</body>
</html>
`
}
