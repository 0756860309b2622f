import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, inject } from 'vitest';
import { createPool, type Pool } from '../../src/store/pool.js';
import { withDatabase } from './urls.js';

export { withDatabase };

export interface TestDb {
  url: string;
  name: string;
  pool: Pool;
}

async function adminQuery(sql: string): Promise<void> {
  const admin = createPool(inject('adminUrl'), { max: 1 });
  try {
    await admin.query(sql);
  } finally {
    await admin.end();
  }
}

/** A fresh database cloned from the migrated template; dropped when the file's tests finish. */
export async function createTestDatabase(opts: { migrated?: boolean; poolMax?: number } = {}): Promise<TestDb> {
  const name = `${inject('templateDb')}_${randomBytes(4).toString('hex')}`;
  await adminQuery(opts.migrated === false ? `CREATE DATABASE ${name}` : `CREATE DATABASE ${name} TEMPLATE ${inject('templateDb')}`);
  const url = withDatabase(inject('adminUrl'), name);
  return { url, name, pool: createPool(url, { max: opts.poolMax ?? 10 }) };
}

export async function dropTestDatabase(db: TestDb): Promise<void> {
  await db.pool.end().catch(() => {});
  await adminQuery(`DROP DATABASE IF EXISTS ${db.name} WITH (FORCE)`);
}

/** Registers beforeAll/afterAll for one database per test file; read `.current` inside tests. */
export function useTestDatabase(opts: { migrated?: boolean } = {}): { readonly current: TestDb } {
  const holder: { current: TestDb } = { current: undefined as unknown as TestDb };
  beforeAll(async () => {
    holder.current = await createTestDatabase(opts);
  });
  afterAll(async () => {
    if (holder.current) await dropTestDatabase(holder.current);
  });
  return holder;
}

/** Polls cond until it is truthy or the (generous) bound passes; for conditions, not timing. */
export async function waitFor<T>(cond: () => Promise<T> | T, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 20_000);
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await cond();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 50));
  }
  throw new Error(`timed out waiting for ${opts.what ?? 'condition'}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * TRUNCATE while a test server runs: its loops may hold one of the tables and want another that
 * the TRUNCATE already holds (a deadlock PostgreSQL breaks by failing one side), so a failed
 * attempt is retried; the server's side retries on its own.
 */
export async function truncateLive(pool: Pool, tables: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await pool.query(`TRUNCATE ${tables}`);
      return;
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 20 || (code !== '40P01' && code !== '55P03')) throw err;
      await new Promise((r) => setTimeout(r, 25 * attempt));
    }
  }
}
