import type { ColumnType } from 'kysely'

/** A 64-bit id: `bigint` in SQL, a decimal string in TypeScript (pg returns int8 as text). */
export type Int8 = ColumnType<string, string | bigint, string | bigint>
export type Timestamp = ColumnType<Date, Date | string, Date | string>
export type Json<T = unknown> = ColumnType<T, T | string, T | string>
