/**
 * X's query language (docs/api.md §2.5): one parser, one AST, two back ends that agree on every Post.
 *
 * - `parseQuery(input, {maxLength})` → AST or X-worded reasons `"<reason> (at position N)"`.
 * - `compileSql(ast)` → a Kysely WHERE condition on `posts` (for search and counts).
 * - `compileMatcher(ast)` → a predicate over a wire Post (+ includes) (stream rules, simulator).
 * - `RuleIndex` → every rule a Post matches, without testing each rule.
 *
 * How they agree: keywords, phrases, `#`/`@`/`$`, `url:`, `is:`, `has:` and `lang:` all read the
 * same array, `searchTerms(post)` from @threadline/domain, stored by the writer in
 * `posts.search_terms` and recomputed in memory. Ids read the columns the writer derives from the
 * same fields. `from:`/`to:` by username read `users` in SQL and, in memory, the user in
 * `includes.users` (or an inlined `author`) whose id is the Post's `author_id` /
 * `in_reply_to_user_id`; an all-digit value matches the id or a username of those digits.
 */
export type { Ast, HasValue, IdField, IsValue } from './ast.js'
export { DEFAULT_MAX_LENGTH, parseQuery, type ParseResult, type ParseOptions } from './parse.js'
export { compileSql } from './sql.js'
export { compileMatcher, compileView, type ViewPredicate } from './matcher.js'
export { viewOf, type PostView } from './view.js'
export { RuleIndex } from './rule-index.js'
export { conversationIdOf } from './inspect.js'
export { tokenize } from '@threadline/domain'
