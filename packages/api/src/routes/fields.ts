import { selection, type FieldSelection } from '@threadline/domain'

/** The field parameters of a Post-returning endpoint, as its spec types them (docs/api.md §2.2). */
export interface FieldParams {
  'tweet.fields'?: readonly string[]
  expansions?: readonly string[]
  'user.fields'?: readonly string[]
}

export function fieldSelection(p: FieldParams): FieldSelection {
  return selection(p['tweet.fields'] ?? [], p.expansions ?? [], p['user.fields'] ?? [])
}
