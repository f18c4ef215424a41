import type { Includes, WirePost } from '@threadline/domain'
import type { Ast } from './ast.js'

export class RuleIndex<T> {
  private readonly rules = new Map<string, { ast: Ast; payload: T }>()
  add(id: string, ast: Ast, payload: T): void {
    this.rules.set(id, { ast, payload })
  }
  remove(id: string): void {
    this.rules.delete(id)
  }
  match(_post: WirePost, _includes?: Includes): T[] {
    return []
  }
  get size(): number {
    return this.rules.size
  }
}
