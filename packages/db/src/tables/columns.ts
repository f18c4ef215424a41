import type { ColumnType } from 'kysely'

/** A 64-bit id: `bigint` in SQL, a decimal string in TypeScript (pg returns int8 as text). */
export type Int8 = ColumnType<string, string | bigint, string | bigint>
export type Timestamp = ColumnType<Date, Date | string, Date | string>
/**
 * A timestamp with a default (`now()`): may be left out of an insert, reads as a Date. Kysely's
 * `Generated<Timestamp>` would read as the column type itself, not as a Date.
 */
export type GeneratedTimestamp = ColumnType<Date, Date | string | undefined, Date | string>
export type Json<T = unknown> = ColumnType<T, T | string, T | string>
