import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { migrate, migrationFiles } from '../../src/store/migrate.js';
import { useTestDatabase } from '../support/db.js';

/** 0027 is part of the pre-release chain: a store made by it is adopted with its owners (baseline.test.ts). */
const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'pre-release-migrations');

describe('pre-release migration 0027: webhooks added over HTTP before it get their token as owner', () => {
  const db = useTestDatabase({ migrated: false });
  const before = mkdtempSync(join(tmpdir(), 'opschain-migrations-'));
  afterAll(() => rmSync(before, { recursive: true, force: true }));

  it('reads the token id from created_by; a webhook added with the store URL stays unowned', async () => {
    for (const f of migrationFiles(MIGRATIONS).filter((m) => m.id < 27)) cpSync(join(MIGRATIONS, `${f.name}.sql`), join(before, `${f.name}.sql`));
    await migrate(db.current.pool, before);
    await db.current.pool.query(
      `INSERT INTO webhooks (template, secret, created_by) VALUES ('t', 's1', 'token:ci (deploy)(tok_0a1b2c)'), ('t', 's2', 'alice'), ('t', 's3', 'token:odd')`,
    );
    await migrate(db.current.pool, MIGRATIONS);
    const owners = [
      { secret: 's1', owner_token_id: 'tok_0a1b2c' },
      { secret: 's2', owner_token_id: null },
      { secret: 's3', owner_token_id: null },
    ];
    const read = async () => (await db.current.pool.query(`SELECT secret, owner_token_id FROM webhooks ORDER BY secret`)).rows;
    expect(await read()).toEqual(owners);
    // Adopted at the baseline, the store keeps them.
    await migrate(db.current.pool);
    expect(await read()).toEqual(owners);
  });
});
