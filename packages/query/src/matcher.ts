import { langTerm, type Includes, type WirePost } from '@threadline/domain'
import type { Ast, IdField } from './ast.js'
import { viewOf, type PostView } from './view.js'

export type ViewPredicate = (view: PostView) => boolean

const always: ViewPredicate = () => true

/** Terms in order, contiguous: the same test as SQL's LIKE over the space-joined array. */
function sequence(terms: string[]): ViewPredicate {
  if (terms.length === 0) return always
  if (terms.length === 1) {
    const t = terms[0]!
    return (v) => v.terms.has(t)
  }
  const needle = ` ${terms.join(' ')} `
  const first = terms[0]!
  return (v) => v.terms.has(first) && v.joined.includes(needle)
}

function idTest(field: IdField, id: string): ViewPredicate {
  switch (field) {
    case 'conversation_id':
      return (v) => v.conversationId === id
    case 'in_reply_to':
      return (v) => v.inReplyTo === id
    case 'quotes_of':
      return (v) => v.refs.some((r) => r.type === 'quoted' && r.id === id)
    case 'retweets_of':
      return (v) => v.refs.some((r) => r.type === 'retweeted' && r.id === id)
  }
}

/** Compiles an AST to a predicate over a prepared Post (shared by the rule index). */
export function compileView(ast: Ast): ViewPredicate {
  switch (ast.type) {
    case 'and': {
      const parts = ast.children.map(compileView)
      return (v) => parts.every((p) => p(v))
    }
    case 'or': {
      const parts = ast.children.map(compileView)
      return (v) => parts.some((p) => p(v))
    }
    case 'not': {
      const inner = compileView(ast.child)
      return (v) => !inner(v)
    }
    case 'text':
    case 'url':
      return sequence(ast.terms)
    case 'entity': {
      const t = ast.term
      return (v) => v.terms.has(t)
    }
    case 'is':
    case 'has': {
      const t = `${ast.type}:${ast.value}`
      return (v) => v.terms.has(t)
    }
    case 'lang': {
      const t = langTerm(ast.value)
      return (v) => v.terms.has(t)
    }
    case 'id':
      return idTest(ast.field, ast.id)
    case 'user': {
      const { id, username } = ast
      if (ast.role === 'from') {
        return (v) =>
          (id !== undefined && v.authorId === id) ||
          (username !== undefined && v.authorUsername === username)
      }
      return (v) =>
        (id !== undefined && v.replyToUserId === id) ||
        (username !== undefined && v.replyToUsername === username)
    }
  }
}

/**
 * The AST as an in-memory predicate over a Post of X's wire shape. `from:`/`to:` by username read
 * the user in `includes.users` whose id is the Post's `author_id` / `in_reply_to_user_id` (or an
 * inlined `author` / `in_reply_to_user` object with that id), as SQL reads the stored users.
 */
export function compileMatcher(ast: Ast): (post: WirePost, includes?: Includes) => boolean {
  const test = compileView(ast)
  return (post, includes) => test(viewOf(post, includes))
}
