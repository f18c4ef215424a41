import type { Expression, ExpressionBuilder, SqlBool } from 'kysely'
import type { Database } from '@threadline/db'
import type { Ast } from './ast.js'

export function compileSql(
  _ast: Ast,
): (eb: ExpressionBuilder<Database, 'posts'>) => Expression<SqlBool> {
  return (eb) => eb.lit(false)
}
