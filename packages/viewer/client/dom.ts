/** Small DOM helpers: elements built with text only (never HTML from data). */

type Child = Node | string

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value)
  for (const child of children) if (child !== '') el.append(child)
  return el
}

export function setStatus(text: string): void {
  const status = document.getElementById('status')
  if (status) status.textContent = text
}

/**
 * Runs a change to the page without moving what the reader looks at: the first element in view
 * keeps its place on screen (docs/api.md §6). The page turns the browser's own scroll anchoring
 * off, so this is the one rule in both Chromium and Firefox.
 */
export function keepViewport(container: HTMLElement, change: () => void): void {
  const anchor = firstInView(container)
  const before = anchor?.getBoundingClientRect().top
  change()
  if (!anchor || before === undefined || !anchor.isConnected) return
  const moved = anchor.getBoundingClientRect().top - before
  if (moved !== 0) scrollBy(0, moved)
}

function firstInView(container: HTMLElement): HTMLElement | undefined {
  if (scrollY === 0) return undefined
  for (const el of container.querySelectorAll<HTMLElement>('.post > .head, .missing > .head')) {
    const rect = el.getBoundingClientRect()
    if (rect.bottom > 0 && rect.height > 0) return el
  }
  return undefined
}
