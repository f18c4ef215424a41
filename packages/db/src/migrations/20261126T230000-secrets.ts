import { randomBytes } from 'node:crypto'
import { sql, type Kysely } from 'kysely'

// Secrets the deployment generates for itself, so none has a shared default (docs/operations.md,
// "Secrets"): the API's pagination-token secret is made here, on the first migrate.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`CREATE TABLE secrets (
    name text PRIMARY KEY,
    value text NOT NULL,
    previous text,
    rotated_at timestamptz NOT NULL DEFAULT now()
  )`.execute(db)
  const value = randomBytes(32).toString('base64url')
  await sql`INSERT INTO secrets (name, value) VALUES ('api_token', ${value})`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS secrets`.execute(db)
}
