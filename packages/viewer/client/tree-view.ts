import { h } from './dom.js'
import { placeholderElement, postElement } from './post-element.js'
import type { Conversation, Node } from './tree.js'

/**
 * Levels indented below the anchor before a branch continues on a view of its own: fewer on a
 * narrow screen, so that text keeps most of the width.
 */
const maxIndent = () => (matchMedia('(max-width: 480px)').matches ? 4 : 6)

interface Rendered {
  el: HTMLElement
  /** The replies' container, when this node's replies are shown in this view. */
  kids?: HTMLElement
  toggle?: HTMLButtonElement
  more?: HTMLButtonElement
  depthFromAnchor: number
}

/**
 * The tree list: the conversation from an anchor (the root, or a deep branch shown on a view of its
 * own, named by `?focus=`), with collapsible replies, breadcrumbs back up and keyboard navigation.
 */
export class TreeView {
  readonly crumbs = h('nav', { class: 'crumbs', 'aria-label': 'Thread' })
  readonly el = h('div', { class: 'tree', id: 'tree' })
  private readonly rendered = new Map<string, Rendered>()
  private anchorId: string

  constructor(
    private readonly conversationId: string,
    /** The conversation shown; replaced when the order changes. */
    public conversation: Conversation,
  ) {
    this.anchorId = new URLSearchParams(location.search).get('focus') ?? conversationId
    addEventListener('popstate', () => {
      this.anchorId = new URLSearchParams(location.search).get('focus') ?? conversationId
      this.renderAll()
    })
    this.el.addEventListener('keydown', (event) => this.onKey(event))
  }

  has(id: string): boolean {
    return this.rendered.has(id)
  }

  /** The whole tree again, from the anchor (a re-anchored view shows one deep branch). */
  renderAll(): void {
    const { conversation } = this
    this.rendered.clear()
    const anchor = conversation.nodes.get(this.anchorId) ?? conversation.root
    this.crumbs.replaceChildren()
    if (anchor !== conversation.root) {
      const up = h('button', { type: 'button', class: 'up' }, '← Whole conversation')
      up.addEventListener('click', () => this.focusOn(this.conversationId, true))
      const parent = anchor.parent
      this.crumbs.append(up)
      if (parent && parent !== conversation.root) {
        const back = h('button', { type: 'button', class: 'up' }, '↑ Parent')
        back.addEventListener('click', () => this.focusOn(parent.id, true))
        this.crumbs.append(' ', back)
      }
    }
    this.el.replaceChildren(this.renderNode(anchor, 0))
  }

  /** Places a node added to the model into the view, if its parent is shown. */
  place(node: Node): void {
    const parent = node.parent
    if (!parent) return this.renderAll()
    for (let up: Node | undefined = parent; up; up = up.parent) this.paintNode(up)
    // A new placeholder comes into view with its first orphan (which it renders with itself).
    if (!parent.post && !this.rendered.has(parent.id) && parent.parent) this.place(parent)
    if (this.rendered.has(node.id)) return
    const entry = this.rendered.get(parent.id)
    if (!entry?.kids) return
    const el = this.renderNode(node, entry.depthFromAnchor + 1)
    const index = parent.children.indexOf(node)
    const after = parent.children[index + 1]
    const before = after ? this.rendered.get(after.id)?.el : undefined
    entry.kids.insertBefore(el, before && before.parentElement === entry.kids ? before : null)
  }

  private renderNode(node: Node, depthFromAnchor: number): HTMLElement {
    const el = node.post
      ? postElement(this.conversation, node)
      : placeholderElement(this.conversationId, node)
    const entry: Rendered = { el, depthFromAnchor }
    this.rendered.set(node.id, entry)
    const head = el.querySelector<HTMLElement>('.head')!
    const toggle = h('button', { type: 'button', class: 'toggle' })
    toggle.addEventListener('click', () => this.setCollapsed(node, !node.collapsed))
    head.prepend(toggle)
    entry.toggle = toggle
    if (depthFromAnchor < maxIndent()) {
      const kids = h('div', { class: 'kids', role: 'group' })
      for (const child of node.children) kids.append(this.renderNode(child, depthFromAnchor + 1))
      el.append(kids)
      entry.kids = kids
    } else {
      const button = h('button', { type: 'button', class: 'continue' })
      button.addEventListener('click', () => this.focusOn(node.id, true))
      el.append(button)
      entry.more = button
    }
    this.paintNode(node)
    return el
  }

  /** The toggle's label, the hidden count and the "continue" link of one node. */
  private paintNode(node: Node): void {
    const entry = this.rendered.get(node.id)
    if (!entry) return
    const hasReplies = node.children.length > 0
    const hidden = this.conversation.hiddenCount(node)
    entry.el.classList.toggle('collapsed', node.collapsed)
    if (entry.toggle) {
      entry.toggle.hidden = !hasReplies
      entry.toggle.setAttribute('aria-expanded', String(!node.collapsed))
      entry.toggle.textContent = node.collapsed ? `+ ${hidden} hidden` : '−'
      entry.toggle.setAttribute(
        'aria-label',
        node.collapsed ? `Show ${hidden} hidden replies` : `Hide ${hidden} replies`,
      )
    }
    if (entry.kids) entry.kids.hidden = node.collapsed
    if (entry.more) {
      entry.more.hidden = !hasReplies || node.collapsed
      entry.more.textContent = `Continue this thread (${hidden}) →`
    }
  }

  private setCollapsed(node: Node, collapsed: boolean): void {
    node.collapsed = collapsed
    this.paintNode(node)
  }

  private focusOn(id: string, push: boolean): void {
    this.anchorId = id
    const url = new URL(location.href)
    if (id === this.conversationId) url.searchParams.delete('focus')
    else url.searchParams.set('focus', id)
    if (push) history.pushState({ focus: id }, '', url)
    this.renderAll()
    this.rendered.get(id)?.el.focus()
  }

  /** j/k or the arrows move between Posts; left and right collapse and expand. */
  private onKey(event: KeyboardEvent): void {
    if (event.target instanceof HTMLInputElement) return
    const items = [...this.el.querySelectorAll<HTMLElement>('.post, .missing')].filter(
      (el) => el.offsetParent !== null,
    )
    const current = (event.target as HTMLElement).closest<HTMLElement>('.post, .missing')
    const index = current ? items.indexOf(current) : -1
    const go = (i: number) => {
      const target = items[Math.max(0, Math.min(items.length - 1, i))]
      if (!target) return
      event.preventDefault()
      target.focus()
    }
    const node = current
      ? this.conversation.nodes.get(current.dataset.postId ?? current.dataset.missingId ?? '')
      : undefined
    switch (event.key) {
      case 'j':
      case 'ArrowDown':
        return go(index + 1)
      case 'k':
      case 'ArrowUp':
        return go(index - 1)
      case 'ArrowLeft':
        if (node && node.children.length > 0 && !node.collapsed) {
          event.preventDefault()
          this.setCollapsed(node, true)
        } else if (node?.parent) {
          go(items.indexOf(this.rendered.get(node.parent.id)?.el ?? current!))
        }
        return
      case 'ArrowRight':
        if (node?.collapsed) {
          event.preventDefault()
          this.setCollapsed(node, false)
        }
        return
    }
  }
}
