import { describe, expect, it } from 'vitest';
import { blockUnplaceable } from '../../src/dispatch/blocked.js';
import { adminQueue } from '../../src/ops/domain/console.js';
import { fleetQueue } from '../../src/ops/domain/fleet.js';
import type { OpsContext } from '../../src/ops/domain/context.js';
import { useTestDatabase } from '../support/db.js';
import { adminQueueRead } from '../../src/store/admin-queue.js';
import { fleetQueueRead } from '../../src/store/fleet.js';
import type { Pool, PoolClient } from '../../src/store/pool.js';
import { mapEntry } from '../../src/store/queue.js';
import { buildAdminQueue } from '../../src/views/admin-queue.js';
import { buildFleetQueue } from '../../src/views/fleet-queue.js';
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

  /**
   * Runs a read model on a client that, once the read's first statement on queue_ready has
   * answered, commits `change` on another connection before the read goes on.
   */
  async function readAcrossChange<T>(pool: Pool, read: (client: PoolClient) => Promise<T>, change: () => Promise<void>): Promise<T> {
    const client = await pool.connect();
    const original = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
    let changed = false;
    (client as unknown as { query: (...a: unknown[]) => Promise<unknown> }).query = async (...args: unknown[]) => {
      const result = await original(...args);
      const sql = typeof args[0] === 'string' ? args[0] : String((args[0] as { text?: string }).text);
      if (!changed && /queue_ready/.test(sql)) {
        changed = true;
        await change();
      }
      return result;
    };
    try {
      return await read(client);
    } finally {
      (client as unknown as { query: unknown }).query = original;
      client.release();
      expect(changed).toBe(true);
    }
  }

  it('each reads its entries and their verdict inputs in one snapshot: a lease taken and a drain pulled mid-read are not seen', async () => {
    const pool = db.current.pool;
    await pool.query(`TRUNCATE runners, queue_ready, step_leases, pool_holds, pool_limits`);
    await insertRunner(pool, { id: 'r-1', name: 'build-1', labels: ['linux'], maxLoad: 4 });
    await pool.query(
      `INSERT INTO queue_ready (step_id, run_id, shard, attempt, priority, lane, fair_key, ready_at)
       SELECT 200 + g, 3000 + g, g % 64, 1, 0, 2, 'acme', now() - g * interval '1 second' FROM generate_series(1, 3) g`,
    );
    let round = 0;
    // Each round moves a different entry into a lease and drains the only runner, committed at once.
    const change = async () => {
      round++;
      const stepId = 200 + round;
      await pool.query(`DELETE FROM queue_ready WHERE step_id = $1`, [stepId]);
      await insertLease(pool, { stepId, runId: 3000 + round, runnerId: 'r-1' });
      await pool.query(`UPDATE runners SET drained = NOT drained WHERE id = 'r-1'`);
    };

    const fleet = buildFleetQueue(await readAcrossChange(pool, (c) => fleetQueueRead(c), change), { acceptExceeding: true });
    expect(fleet.entries.map((e) => [e.stepId, e.state, e.verdict.code])).toEqual([
      [203, 'ready', 'waiting_for_tick'],
      [202, 'ready', 'waiting_for_tick'],
      [201, 'ready', 'waiting_for_tick'],
    ]);

    // The store now: 201 leased, r-1 drained. The admin queue, read across the next change, sees
    // that and not the next lease nor the undrain.
    const admin = buildAdminQueue(await readAcrossChange(pool, (c) => adminQueueRead(c), change), { acceptExceeding: true, stalenessMs: 15_000 });
    expect(admin.waiting.groups.map((g) => [g.code, g.entries.map((e) => e.stepId).sort()])).toEqual([['all_matches_drained', [202, 203]]]);
    expect(admin.leases.items.map((l) => l.stepId)).toEqual([201]);
  });
});
