import { afterAll, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/db.js';
import { Fleet } from './e2e-support.js';

describe('1,000 steps through 4 runner processes', () => {
  const db = useTestDatabase();
  let fleet: Fleet | undefined;
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('executes each step exactly once, counted by its side effect', async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer();
    const runners = [1, 2, 3, 4].map((i) => fleet!.runner(`bulk-${i}`, ['--max-parallel-steps', '4', '--max-load', '4']));
    const ids = await Promise.all(runners.map((r) => fleet!.ready(r)));
    const side = fleet.path('bulk.side');
    const runIds: number[] = [];
    for (let r = 0; r < 10; r++) {
      const steps: Record<string, { run: string }> = {};
      for (let s = 0; s < 100; s++) steps[`s${s}`] = { run: 'echo "$OPSCHAIN_RUN_ID $OPSCHAIN_STEP" >> "$SIDE"' };
      runIds.push(await fleet.submit({ name: `bulk-${r}`, env: { SIDE: side }, steps }));
    }
    for (const id of runIds) expect(await fleet.runDone(id, 240_000)).toMatchObject({ status: 'succeeded' });

    const counts = new Map<string, number>();
    for (const line of fleet.lines('bulk.side')) counts.set(line, (counts.get(line) ?? 0) + 1);
    expect(counts.size).toBe(1000);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    for (const id of runIds) for (let s = 0; s < 100; s++) expect(counts.get(`${id} s${s}`)).toBe(1);

    const { rows } = await db.current.pool.query(`SELECT runner_id, count(*)::int AS n FROM steps WHERE run_id = ANY($1::bigint[]) GROUP BY runner_id`, [runIds]);
    expect(rows.map((r) => r.runner_id).sort()).toEqual([...ids].sort());
  }, 300_000);
});
