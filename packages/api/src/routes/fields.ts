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

/**
 * A JSON object from members that are JSON text already, leaving out absent ones (as compact()
 * does for objects). Pages of Posts in wire form are answered this way, never parsed and
 * serialized again.
 */
export function jsonObject(members: Array<[string, string | undefined]>): string {
  const parts: string[] = []
  for (const [key, value] of members) if (value !== undefined) parts.push(`"${key}":${value}`)
  return `{${parts.join(',')}}`
}

/** A JSON array of JSON texts, or undefined when empty (docs/api.md §1: never []). */
export function jsonArray(items: readonly string[]): string | undefined {
  return items.length === 0 ? undefined : `[${items.join(',')}]`
}

export const jsonOf = (value: readonly unknown[]): string | undefined =>
  value.length === 0 ? undefined : JSON.stringify(value)
