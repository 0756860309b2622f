import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/db.js';
import { Fleet } from './e2e-support.js';

/** Steps as an attacker or a careless author writes them, on a real runner process. */
describe('hostile steps on a real runner', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer();
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  const stdout = async (runId: number, step: string) =>
    (await db.current.pool.query(`SELECT string_agg(l.chunk, '' ORDER BY l.id) AS t FROM step_logs l JOIN steps s ON s.id = l.step_id WHERE s.run_id = $1 AND s.name = $2 AND l.stream = 'stdout'`, [runId, step])).rows[0].t as string;

  it('a step printing NUL bytes and invalid UTF-8 finishes, its output stored visibly replaced', async () => {
    const runner = fleet.runner('nul');
    await fleet.ready(runner);
    const runId = await fleet.submit({ name: 'nul', steps: { nul: { run: `printf 'a\\000b\\377c\\n'` } } });
    expect(await fleet.runDone(runId)).toMatchObject({ status: 'succeeded' });
    expect(await stdout(runId, 'nul')).toBe('a\u2400b\ufffdc\n');
  });
});
