import { h } from './dom.js'
import type { Sort } from './tree.js'

const SORTS: Array<{ value: Sort; label: string }> = [
  { value: 'oldest', label: 'Oldest' },
  { value: 'newest', label: 'Newest' },
  { value: 'top', label: 'Top' },
]

export interface SortTabs {
  el: HTMLElement
  /** Marks `sort` as the selected tab. */
  paint(sort: Sort): void
}

/** The order-of-replies tabs: a click or the arrow keys choose an order. */
export function sortTabs(current: () => Sort, choose: (sort: Sort) => void): SortTabs {
  const tabs = h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Order of replies' })
  for (const { value, label } of SORTS) {
    const tab = h('button', { type: 'button', role: 'tab', 'data-sort': value }, label)
    tab.addEventListener('click', () => choose(value))
    tabs.append(tab)
  }
  tabs.addEventListener('keydown', (event) => {
    const index = SORTS.findIndex((s) => s.value === current())
    const step = event.key === 'ArrowRight' ? 1 : event.key === 'ArrowLeft' ? -1 : 0
    if (step === 0) return
    event.preventDefault()
    const next = SORTS[(index + step + SORTS.length) % SORTS.length]!.value
    choose(next)
    tabs.querySelector<HTMLElement>(`[data-sort="${next}"]`)?.focus()
  })
  return {
    el: tabs,
    paint(sort) {
      for (const tab of tabs.querySelectorAll<HTMLElement>('[role=tab]')) {
        const selected = tab.dataset.sort === sort
        tab.setAttribute('aria-selected', String(selected))
        tab.tabIndex = selected ? 0 : -1
      }
    },
  }
}

/** The order the address asks for, `oldest` when it names none. */
export function sortFromUrl(params: URLSearchParams): Sort {
  return SORTS.find((s) => s.value === params.get('sort'))?.value ?? 'oldest'
}
