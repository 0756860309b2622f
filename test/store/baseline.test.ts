import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, migrationFiles, MIGRATIONS_DIR } from '../../src/store/migrate.js';
import { PRE_RELEASE_CHAIN } from '../../src/store/pre-release.js';
import { schemaCatalog } from '../support/catalog.js';
import { runCli } from '../support/cli.js';
import { createTestDatabase, dropTestDatabase, type TestDb } from '../support/db.js';

/** The migrations a store was made by before the baseline, kept only to prove the two agree. */
const PRE_RELEASE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'pre-release-migrations');

describe('the baseline schema', () => {
  const dbs: TestDb[] = [];
  const dirs: string[] = [];
  const fresh = async () => {
    // A handful of databases at once in this file: two connections each is all it needs.
    const db = await createTestDatabase({ migrated: false, poolMax: 2 });
    dbs.push(db);
    return db;
  };
  /** A directory holding the first n migrations of the pre-release chain. */
  const chainPrefix = (n: number) => {
    const dir = mkdtempSync(join(tmpdir(), 'opschain-chain-'));
    dirs.push(dir);
    for (const f of migrationFiles(PRE_RELEASE).slice(0, n)) cpSync(join(PRE_RELEASE, `${f.name}.sql`), join(dir, `${f.name}.sql`));
    return dir;
  };
  let baseline: TestDb;
  /** The schema of the baseline alone, and of every migration (the baseline and those after it). */
  let baselineCatalog: string[];
  let currentCatalog: string[];
  const later = migrationFiles().slice(1).map((m) => m.name);
  beforeAll(async () => {
    baseline = await fresh();
    const onlyBaseline = mkdtempSync(join(tmpdir(), 'opschain-baseline-'));
    dirs.push(onlyBaseline);
    cpSync(join(MIGRATIONS_DIR, '0001_baseline.sql'), join(onlyBaseline, '0001_baseline.sql'));
    await migrate(baseline.pool, onlyBaseline);
    baselineCatalog = await schemaCatalog(baseline.pool);
    const current = await fresh();
    await migrate(current.pool);
    currentCatalog = await schemaCatalog(current.pool);
  });
  afterAll(async () => {
    for (const db of dbs) await dropTestDatabase(db);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('is one migration, and the numbering has no gaps', () => {
    const ids = migrationFiles().map((m) => m.id);
    expect(migrationFiles()[0].name).toBe('0001_baseline');
    expect(ids).toEqual(ids.map((_, i) => i + 1));
  });

  it('the pre-release chain is the one its adoption checks for', () => {
    expect(migrationFiles(PRE_RELEASE).map((m) => m.name)).toEqual([...PRE_RELEASE_CHAIN]);
  });

  it('has the schema the whole pre-release chain built, renames aside: tables, columns, defaults, indexes, predicates, fillfactors, constraints, functions', async () => {
    const old = await fresh();
    await migrate(old.pool, PRE_RELEASE);
    const renamed = (line: string) =>
      line.replaceAll('scheduler_job_leases', 'step_leases').replaceAll('scheduler_done_at_brin', 'completed_attempts_at_brin').replaceAll('scheduler_done', 'completed_attempts').replaceAll('scheduler_run_pins', 'run_pins');
    const oldCatalog = (await schemaCatalog(old.pool)).map(renamed).sort();
    expect(baselineCatalog.length).toBeGreaterThan(300);
    expect(oldCatalog).toEqual(baselineCatalog);
    const seeded = async (db: TestDb) => (await db.pool.query(`SELECT id, quiesced, halted, system_quiesced FROM fleet_posture`)).rows;
    expect(await seeded(old)).toEqual(await seeded(baseline));
  });

  it('the comparison sees a difference in a partial predicate or a fillfactor', async () => {
    const other = await fresh();
    await migrate(other.pool);
    await other.pool.query(`ALTER TABLE steps SET (fillfactor = 50)`);
    expect(await schemaCatalog(other.pool)).not.toEqual(currentCatalog);
    await other.pool.query(`ALTER TABLE steps SET (fillfactor = 33)`);
    expect(await schemaCatalog(other.pool)).toEqual(currentCatalog);
    await other.pool.query(`DROP INDEX queue_ready_order_idx; CREATE INDEX queue_ready_order_idx ON queue_ready (lane, position)`);
    expect(await schemaCatalog(other.pool)).not.toEqual(currentCatalog);
  });

  it('adopts a store the whole pre-release chain made: its rows kept, its ledger the baseline, then the migrations after it', async () => {
    const old = await fresh();
    await migrate(old.pool, PRE_RELEASE);
    await old.pool.query(`INSERT INTO runs (name, definition) VALUES ('kept', '{}')`);
    await old.pool.query(`INSERT INTO scheduler_run_pins (run_id, runner_id) VALUES (7, 'rnr_kept')`);
    await old.pool.query(`INSERT INTO scheduler_done (step_id, attempt, token) VALUES (3, 1, 42)`);
    await old.pool.query(
      `INSERT INTO coordination_leases (name, holder, token, expires_at) VALUES ('cron-leader', 'web-1', 5, now() + interval '1 minute'), ('shard:0', 'web-1', 6, now() + interval '1 minute')`,
    );
    const adopted = await migrate(old.pool);
    expect(adopted.map((m) => m.name)).toEqual(later);
    expect(await schemaCatalog(old.pool)).toEqual(currentCatalog);
    expect((await old.pool.query(`SELECT id, name FROM opschain_migrations ORDER BY id`)).rows).toEqual(migrationFiles().map((m) => ({ id: m.id, name: m.name })));
    expect((await old.pool.query(`SELECT name FROM runs`)).rows).toEqual([{ name: 'kept' }]);
    expect((await old.pool.query(`SELECT run_id, runner_id FROM run_pins`)).rows).toEqual([{ run_id: 7, runner_id: 'rnr_kept' }]);
    expect((await old.pool.query(`SELECT step_id, attempt, token FROM completed_attempts`)).rows).toEqual([{ step_id: 3, attempt: 1, token: 42 }]);
    expect((await old.pool.query(`SELECT name, holder, token FROM coordination_leases ORDER BY name`)).rows).toEqual([
      { name: 'leader', holder: 'web-1', token: 5 },
      { name: 'shard:0', holder: 'web-1', token: 6 },
    ]);
    expect(await migrate(old.pool)).toEqual([]);
  });

  it('refuses a store an earlier pre-release made, naming what to do, and changes nothing', async () => {
    const old = await fresh();
    await migrate(old.pool, chainPrefix(PRE_RELEASE_CHAIN.length - 2));
    const before = await schemaCatalog(old.pool);
    const ledger = async () => (await old.pool.query(`SELECT id, name FROM opschain_migrations ORDER BY id`)).rows;
    const ledgerBefore = await ledger();
    await expect(migrate(old.pool)).rejects.toMatchObject({
      code: 'schema_too_old',
      message: expect.stringMatching(/stops at migration 0026_blocked_entries, before 0028_registration_token_groups; migrate it first with a pre-release build that has 0028_registration_token_groups/),
    });
    expect(await schemaCatalog(old.pool)).toEqual(before);
    expect(await ledger()).toEqual(ledgerBefore);
  });

  it('refuses a store with a migration this binary does not know (a newer release made it), changing nothing', async () => {
    const newer = await fresh();
    await migrate(newer.pool);
    await newer.pool.query(`INSERT INTO opschain_migrations (id, name) VALUES ($1, $2)`, [migrationFiles().length + 1, '9999_from_the_future']);
    await expect(migrate(newer.pool)).rejects.toMatchObject({ code: 'schema_newer', message: expect.stringMatching(/upgrade opschain/) });
    expect(await schemaCatalog(newer.pool)).toEqual(currentCatalog);
  });

  it('refuses a ledger whose migration of the same number has another name', async () => {
    const other = await fresh();
    await migrate(other.pool);
    await other.pool.query(`UPDATE opschain_migrations SET name = '0001_elsewhere' WHERE id = 1`);
    await expect(migrate(other.pool)).rejects.toMatchObject({ code: 'schema_unknown', message: expect.stringMatching(/migration 1 is 0001_elsewhere, this binary's is 0001_baseline/) });
  });

  it('db migrate and server start answer a store they cannot migrate with the error and exit 4, and db status shows the baseline pending on a store they can adopt', async () => {
    const tooOld = await fresh();
    await migrate(tooOld.pool, chainPrefix(5));
    const viaMigrate = await runCli(['db', 'migrate', '--json', '--database-url', tooOld.url]);
    expect(viaMigrate.code, viaMigrate.stdout + viaMigrate.stderr).toBe(4);
    expect(JSON.parse(viaMigrate.stdout).error).toMatchObject({ code: 'schema_too_old', message: expect.stringMatching(/stops at migration 0007_step_log_bytes/) });
    const viaStart = await runCli(['server', 'start', '--port', '0', '--database-url', tooOld.url]);
    expect(viaStart.code, viaStart.stderr).toBe(4);
    expect(viaStart.stderr).toMatch(/store schema too old to adopt: .*stops at migration 0007_step_log_bytes/);

    const whole = await fresh();
    await migrate(whole.pool, PRE_RELEASE);
    const status = await runCli(['db', 'status', '--json', '--database-url', whole.url]);
    const shown = JSON.parse(status.stdout);
    expect(shown.pending).toBe(migrationFiles().length);
    expect(shown.migrations[0]).toMatchObject({ id: 1, name: '0001_baseline', applied: false });
    const adopt = await runCli(['db', 'migrate', '--json', '--database-url', whole.url]);
    expect(adopt.code).toBe(0);
    expect(await schemaCatalog(whole.pool)).toEqual(currentCatalog);
  });
});
