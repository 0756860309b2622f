import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { migrate, migrationFiles, MIGRATIONS_DIR } from '../../src/store/migrate.js';
import { traceUnsentClaim } from '../../src/store/traces.js';
import { useTestDatabase } from '../support/db.js';

describe('migration 0007: spans owed move to trace_unsent', () => {
  const db = useTestDatabase({ migrated: false });
  const dir = mkdtempSync(join(tmpdir(), 'opschain-0006-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('a run a cancel marked under 0006 is owed afterwards: its round and the attempt the cancel stopped, as facts', async () => {
    for (const m of migrationFiles().filter((f) => f.id <= 6)) cpSync(join(MIGRATIONS_DIR, `${m.name}.sql`), join(dir, `${m.name}.sql`));
    await migrate(db.current.pool, dir);
    const { runId } = await runSubmit(db.current.pool, runFileLoad(JSON.stringify({ name: 'old-cancel', steps: { first: { run: 'sleep 60' }, second: { run: 'true', needs: ['first'] } } })), { actor: 'test' });
    // As a 0006 cancel left it: the run cancelled and marked, the running step cancelled.
    await db.current.pool.query(
      `UPDATE steps SET status = 'cancelled', cause = 'cancelled by bob', started_at = now(), finished_at = now() WHERE run_id = $1 AND name = 'first'`,
      [runId],
    );
    await db.current.pool.query(`UPDATE steps SET status = 'cancelled', cause = 'cancelled by bob', finished_at = now() WHERE run_id = $1 AND name = 'second'`, [runId]);
    await db.current.pool.query(`UPDATE runs SET status = 'cancelled', cause = 'cancelled by bob', finished_at = now(), trace_unsent = true WHERE id = $1`, [runId]);
    await migrate(db.current.pool);
    const { rows: cols } = await db.current.pool.query(`SELECT 1 FROM information_schema.columns WHERE table_name = 'runs' AND column_name = 'trace_unsent'`);
    expect(cols).toEqual([]);
    const owed = await traceUnsentClaim(db.current.pool, { limit: 10, resendAfterMs: 60_000 });
    // Two rows, the run's round and the attempt, each read as the spans owed it holds.
    expect(owed.map((o) => [o.attempts.length, o.runs.length]).sort()).toEqual([
      [0, 1],
      [1, 0],
    ]);
    const run = owed.flatMap((o) => o.runs)[0];
    const attempt = owed.flatMap((o) => o.attempts)[0];
    expect(run).toMatchObject({ id: runId, name: 'old-cancel', status: 'cancelled', cause: 'cancelled by bob', round: 0, launch: null });
    expect(run.finishedAt).toBeInstanceOf(Date);
    // The step that never started has no attempt owed.
    expect(attempt).toMatchObject({ step: 'first', attempt: 1, outcome: 'cancelled', cause: 'cancelled by bob', lease: null, run: { id: runId, round: 0 } });
    expect(attempt.startedAt).toBeInstanceOf(Date);
  });
});
