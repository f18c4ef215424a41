import type { Expression, ExpressionBuilder, SqlBool } from 'kysely'
import type { Database } from '@threadline/db'
import { langTerm } from '@threadline/domain'
import type { Ast } from './ast.js'

type Eb = ExpressionBuilder<Database, 'posts'>
type Bool = Expression<SqlBool>

/** LIKE's default escape character is a backslash. */
const escapeLike = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`)

/**
 * Terms in order, contiguous. The GIN index finds rows holding every term; the LIKE over the
 * space-joined array then keeps those where they are adjacent (the matcher's substring test).
 */
function sequence(eb: Eb, terms: string[]): Bool {
  if (terms.length === 0) return eb.lit(true)
  const contains = eb('posts.search_terms', '@>', eb.val(terms))
  if (terms.length === 1) return contains
  const space = eb.cast<string>(eb.val(' '), 'text')
  const joined = eb(
    eb(space, '||', eb.fn<string>('array_to_string', ['posts.search_terms', space])),
    '||',
    space,
  )
  return eb.and([contains, eb(joined, 'like', `% ${escapeLike(terms.join(' '))} %`)])
}

function term(eb: Eb, t: string): Bool {
  return eb('posts.search_terms', '@>', eb.val([t]))
}

/** A quote or retweet is newer than what it references: the id bound prunes older partitions. */
function referencedBy(eb: Eb, type: 'quoted' | 'retweeted', id: string): Bool {
  return eb(
    'posts.id',
    'in',
    eb
      .selectFrom('post_references as qr')
      .select('qr.post_id')
      .where('qr.referenced_id', '=', id)
      .where('qr.type', '=', type)
      .where('qr.post_id', '>', id),
  )
}

function user(
  eb: Eb,
  column: 'posts.author_id' | 'posts.in_reply_to_user_id',
  ast: Ast & { type: 'user' },
): Bool {
  const parts: Bool[] = []
  if (ast.id !== undefined) parts.push(eb(column, '=', ast.id))
  if (ast.username !== undefined) {
    const username = ast.username
    parts.push(
      eb(
        column,
        'in',
        eb
          .selectFrom('users as qu')
          .select('qu.id')
          .where((u) => u(u.fn('lower', ['qu.username']), '=', username)),
      ),
    )
  }
  return parts.length === 1 ? parts[0]! : eb.or(parts)
}

function compile(eb: Eb, ast: Ast): Bool {
  switch (ast.type) {
    case 'and':
      return eb.and(ast.children.map((c) => compile(eb, c)))
    case 'or':
      return eb.or(ast.children.map((c) => compile(eb, c)))
    case 'not':
      // IS NOT TRUE, not NOT: a NULL (absent column) is false, so its negation must be true.
      return eb(eb.parens(compile(eb, ast.child)), 'is not', eb.lit(true))
    case 'text':
    case 'url':
      return sequence(eb, ast.terms)
    case 'entity':
      return term(eb, ast.term)
    case 'is':
    case 'has':
      return term(eb, `${ast.type}:${ast.value}`)
    case 'lang':
      return term(eb, langTerm(ast.value))
    case 'id':
      switch (ast.field) {
        // A conversation's id is its root's, and a reply is newer than what it replies to: the
        // id bound lets the planner skip the partitions from before (docs/capacity.md §2).
        case 'conversation_id':
          return eb.and([eb('posts.conversation_id', '=', ast.id), eb('posts.id', '>=', ast.id)])
        case 'in_reply_to':
          return eb.and([eb('posts.in_reply_to_post_id', '=', ast.id), eb('posts.id', '>', ast.id)])
        case 'quotes_of':
          return referencedBy(eb, 'quoted', ast.id)
        case 'retweets_of':
          return referencedBy(eb, 'retweeted', ast.id)
      }
    // falls through (unreachable: the switch above is exhaustive)
    case 'user':
      return user(
        eb,
        ast.role === 'from' ? 'posts.author_id' : 'posts.in_reply_to_user_id',
        ast as Ast & { type: 'user' },
      )
  }
}

/**
 * The AST as a WHERE condition on `posts` (other tables may be joined; every column is qualified).
 * Input reaches Postgres only as parameters. Keywords, phrases, entities and is/has/lang flags use
 * `posts.search_terms` (GIN); ids use their btree indexes; `from:`/`to:` by username look up
 * `users` by `lower(username)` (indexed).
 */
export function compileSql(ast: Ast): (eb: Eb) => Bool {
  return (eb) => compile(eb, ast)
}
