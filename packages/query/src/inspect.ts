import type { Ast } from './ast.js'

/** The conversation id when the rule is exactly `conversation_id:X` (the backfill's trigger). */
export function conversationIdOf(ast: Ast): string | undefined {
  return ast.type === 'id' && ast.field === 'conversation_id' ? ast.id : undefined
}
