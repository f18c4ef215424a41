import type { Includes, WirePost } from '@threadline/domain'
import type { Ast } from './ast.js'

export function compileMatcher(_ast: Ast): (post: WirePost, includes?: Includes) => boolean {
  return () => false
}
