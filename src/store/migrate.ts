import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Pool } from './pool.js';

const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
/** Arbitrary but fixed: every replica contends for the same advisory lock. */
const MIGRATION_LOCK_KEY = 7_420_001;

export interface Migration { id: number; name: string; sql: string }
export interface MigrationStatus { id: number; name: string; applied: boolean; appliedAt: string | null }

export function migrationFiles(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({ id: Number(f.slice(0, 4)), name: f.replace(/\.sql$/, ''), sql: readFileSync(join(dir, f), 'utf8') }));
}

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS opschain_migrations (
  id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`;

/**
 * Applies every pending migration in one transaction under a transaction-scoped advisory lock:
 * concurrent migrators queue on the lock, and the later ones find nothing left to do.
 */
export async function migrate(pool: Pool, dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const files = migrationFiles(dir);
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    // Migrations may legitimately take longer than the request-path bounds.
    await client.query(`SET LOCAL statement_timeout = '5min'`);
    await client.query(`SET LOCAL lock_timeout = '2min'`);
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await client.query(CREATE_TABLE);
    const { rows } = await client.query<{ id: number }>('SELECT id FROM opschain_migrations');
    const done = new Set(rows.map((r) => r.id));
    const applied: Migration[] = [];
    for (const m of files) {
      if (done.has(m.id)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO opschain_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      applied.push(m);
    }
    await client.query('COMMIT');
    return applied;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

export async function migrationStatus(pool: Pool, dir = MIGRATIONS_DIR): Promise<MigrationStatus[]> {
  const files = migrationFiles(dir);
  const { rows: exists } = await pool.query(`SELECT to_regclass('opschain_migrations') AS t`);
  const applied = new Map<number, string>();
  if (exists[0].t) {
    const { rows } = await pool.query<{ id: number; applied_at: Date }>('SELECT id, applied_at FROM opschain_migrations');
    for (const r of rows) applied.set(r.id, r.applied_at.toISOString());
  }
  return files.map((m) => ({ id: m.id, name: m.name, applied: applied.has(m.id), appliedAt: applied.get(m.id) ?? null }));
}
