/** Posts kept for one conversation and one field list. */
const MAX_PER_FIELD_LIST = 2_000
/** Field lists kept for one conversation: the first ones asked for. */
const MAX_FIELD_LISTS = 4

/**
 * A conversation's Posts in wire form (JSON text by id), per field list, as read at one version of
 * it: a page finds its Posts here instead of reading them again while the version stands, and the
 * Posts a change left alone stay valid at the next version (`without`).
 */
export class WirePosts {
  private readonly byFields = new Map<string, Map<string, string>>()
  /** Posts held over all field lists. */
  count = 0

  get(fields: string): ReadonlyMap<string, string> | undefined {
    return this.byFields.get(fields)
  }

  /** Keeps `posts`, the least recently kept going first past the bound. */
  keep(fields: string, posts: ReadonlyMap<string, string>): void {
    if (posts.size === 0) return
    let kept = this.byFields.get(fields)
    if (!kept) {
      if (this.byFields.size >= MAX_FIELD_LISTS) return
      this.byFields.set(fields, (kept = new Map()))
    }
    for (const [id, json] of posts) {
      if (kept.delete(id)) this.count--
      kept.set(id, json)
      this.count++
    }
    for (const id of kept.keys()) {
      if (kept.size <= MAX_PER_FIELD_LIST) break
      kept.delete(id)
      this.count--
    }
  }

  /** A copy without the Posts `changed` names. */
  without(changed: ReadonlySet<string>): WirePosts {
    const copy = new WirePosts()
    for (const [fields, posts] of this.byFields) {
      const kept = new Map<string, string>()
      for (const [id, json] of posts) if (!changed.has(id)) kept.set(id, json)
      copy.byFields.set(fields, kept)
      copy.count += kept.size
    }
    return copy
  }
}
