import { describe, expect, it } from 'vitest';
import { blockUnplaceable } from '../../src/dispatch/blocked.js';
import { adminQueue } from '../../src/ops/domain/console.js';
import { fleetQueue } from '../../src/ops/domain/fleet.js';
import type { OpsContext } from '../../src/ops/domain/context.js';
import { useTestDatabase } from '../support/db.js';
import { mapEntry } from '../../src/store/queue.js';
import { insertLease, insertRunner } from '../support/fleet.js';

describe('the admin queue and the fleet queue read their verdict inputs one way', () => {
  const db = useTestDatabase();

  it('give every ready entry the same verdict on the same store state', async () => {
    const pool = db.current.pool;
    const ctx: OpsContext = { pool, actor: 'test', source: 'test', acceptExceeding: true };
    await insertRunner(pool, { id: 'r-1', name: 'build-1', labels: ['linux'], maxLoad: 2 });
    await insertRunner(pool, { id: 'r-2', name: 'build-2', labels: ['arm'], drained: true });
    const { rows: run } = await pool.query(`INSERT INTO runs (name, project, target, definition) VALUES ('deploy', 'acme', 'acme/prod/web', '{}') RETURNING id`);
    const runId = Number(run[0].id);
    const { rows: step } = await pool.query(`INSERT INTO steps (run_id, name, command, status, attempt) VALUES ($1, 'migrate', 'true', 'running', 1) RETURNING id`, [runId]);
    const leased = Number(step[0].id);
    // The one slot of pool db is taken by the leased step.
    await insertLease(pool, { stepId: leased, runId, runnerId: 'r-1', pools: ['db'] });
    await pool.query(`INSERT INTO pool_limits (name, max_holders) VALUES ('db', 1)`);
    await pool.query(`INSERT INTO pool_holds (pool, step_id, attempt) VALUES ('db', $1, 1)`, [leased]);
    // Ready entries: two wait on the full pool, two need a gpu nobody has, two only the drained
    // runner (arm) could take, three go to build-1 on the next tick.
    await pool.query(
      `INSERT INTO queue_ready (step_id, run_id, shard, attempt, priority, lane, fair_key, ready_at, pools, requirement)
       SELECT 100 + g, 2000 + g, g % 64, 1, 0, 2, 'acme', now() - g * interval '1 second',
              CASE WHEN g <= 2 THEN ARRAY['db'] ELSE ARRAY[]::text[] END,
              CASE WHEN g IN (3, 4) THEN '{"labels":["gpu"]}' WHEN g IN (5, 6) THEN '{"labels":["arm"]}' END::jsonb
         FROM generate_series(1, 9) g`,
    );

    const admin = await adminQueue(ctx, { limit: 100 });
    const fleet = await fleetQueue(ctx, { limit: 100 });

    const fleetReady = fleet.entries.filter((e) => e.state === 'ready');
    const fleetByCode: Record<string, number> = {};
    for (const e of fleetReady) fleetByCode[e.verdict.code] = (fleetByCode[e.verdict.code] ?? 0) + 1;
    const adminByCode = Object.fromEntries(admin.waiting.groups.map((g) => [g.code, g.count]));
    expect(adminByCode).toEqual({ pool_full: 2, no_runner_matches: 2, all_matches_drained: 2, waiting_for_tick: 3 });
    expect(fleetByCode).toEqual(adminByCode);
    // Entry by entry, the same verdict and the same words.
    const fleetVerdict = new Map(fleetReady.map((e) => [e.stepId, e.verdict]));
    const adminEntries = admin.waiting.groups.flatMap((g) => g.entries);
    expect(adminEntries).toHaveLength(9);
    for (const e of adminEntries) expect(e.verdict).toEqual(fleetVerdict.get(e.stepId));
    // And the same posture, lifted or not.
    expect(admin.postures.fleetQuiesced).toBe(fleet.posture.fleetQuiesced);

    // A tick that could place none of them sets aside those only a change elsewhere can place,
    // on the verdict the views show; those the next tick places keep their place.
    const entries = (await pool.query(`SELECT * FROM queue_ready ORDER BY step_id`)).rows.map(mapEntry);
    expect(await blockUnplaceable(pool, entries, true)).toBe(6);
    const { rows: aside } = await pool.query(`SELECT step_id, blocked_verdict FROM queue_ready ORDER BY step_id`);
    for (const r of aside) {
      const shown = fleetVerdict.get(Number(r.step_id))!.code;
      expect(r.blocked_verdict ?? 'kept in place').toBe(shown === 'waiting_for_tick' ? 'kept in place' : shown);
    }
  });
});
