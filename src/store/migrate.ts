import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Conflict } from '../errors.js';
import type { Pool } from './pool.js';
import { isPreReleaseStore, preReleaseAdopt, type AppliedMigration } from './pre-release.js';

export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');
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

const BASELINE = '0001_baseline';

const CREATE_TABLE = `CREATE TABLE IF NOT EXISTS opschain_migrations (
  id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`;

/**
 * The store's ledger must be a prefix of this binary's migrations, id and name alike: a migration
 * it does not know means a newer binary (or another chain) made the store, and applying ours on top
 * would mix two schemas.
 */
function ledgerCheck(files: Migration[], applied: AppliedMigration[]): void {
  const byId = new Map(files.map((m) => [m.id, m]));
  const last = files.at(-1);
  for (const a of [...applied].sort((x, y) => x.id - y.id)) {
    const ours = byId.get(a.id);
    if (ours?.name === a.name) continue;
    if (!ours && last && a.id > last.id) {
      throw new Conflict(
        `store schema is newer than this opschain: the store has migration ${a.name}, this binary knows up to ${last.name}; upgrade opschain to a release that has it`,
        'schema_newer',
      );
    }
    throw new Conflict(
      `store schema unknown: the store's migration ${a.id} is ${a.name}, this binary's is ${ours?.name ?? 'none'}; it was not made by an opschain release this binary can migrate`,
      'schema_unknown',
    );
  }
}

/**
 * Applies every pending migration in one transaction under a transaction-scoped advisory lock:
 * concurrent migrators queue on the lock, and the later ones find nothing left to do. A store made
 * by the pre-release chain is adopted at the baseline or refused (src/store/pre-release.ts); a
 * store with migrations this binary does not know is refused. Either refusal changes nothing.
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
    let { rows } = await client.query<AppliedMigration>('SELECT id, name FROM opschain_migrations');
    if (files[0]?.name === BASELINE && isPreReleaseStore(rows)) {
      await preReleaseAdopt(client, rows);
      rows = [{ id: 1, name: BASELINE }];
    }
    ledgerCheck(files, rows);
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
  const applied = new Map<string, string>();
  if (exists[0].t) {
    const { rows } = await pool.query<{ name: string; applied_at: Date }>('SELECT name, applied_at FROM opschain_migrations');
    for (const r of rows) applied.set(r.name, r.applied_at.toISOString());
  }
  // By name: a pre-release store's 0001_foundation is not this binary's 0001_baseline (pending
  // until `db migrate` adopts it).
  return files.map((m) => ({ id: m.id, name: m.name, applied: applied.has(m.name), appliedAt: applied.get(m.name) ?? null }));
}
