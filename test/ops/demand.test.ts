import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMAND_REASONS, demandOf } from '../../src/core/capacity.js';
import { fleetDemand } from '../../src/ops/domain/capacity.js';
import type { OpsContext } from '../../src/ops/domain/context.js';
import type { ServerHandle } from '../../src/server.js';
import { capacityRead } from '../../src/store/capacity.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { buildFleetDemand } from '../../src/views/fleet-demand.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';
import { runInProcess } from '../support/inproc.js';
import { parsePrometheus } from '../support/prom.js';
import { seedRun } from '../support/seed.js';
import { startTestServer } from '../support/server.js';

const steps = (prefix: string, n: number, extra: Record<string, unknown> = {}) => Array.from({ length: n }, (_, i) => ({ name: `${prefix}${i}`, ...extra }));

describe('fleet demand: per group, what waits for capacity and what waits for something runners cannot fix', () => {
  const db = useTestDatabase();
  let ctx: OpsContext;
  let server: ServerHandle;
  let seeded: Record<string, { runId: number; stepIds: number[] }>;

  /**
   * build: two runners full by load (each running a load-2 step of max_load 2) and one drained;
   * deploy: one idle runner with one slot; old: one offline runner. Queued: 5 build steps (capacity),
   * 3 build steps behind a pool at its limit, 4 gpu steps no runner matches, 3 deploy steps (one
   * starts, two wait for the one slot), 2 steps for the offline group.
   */
  beforeAll(async () => {
    const pool = db.current.pool;
    ctx = { pool, actor: 'test', source: 'test', acceptExceeding: true };
    await insertRunner(pool, { id: 'rnr_b1', name: 'b1', group: 'build', maxLoad: 2, maxParallelSteps: 1 });
    await insertRunner(pool, { id: 'rnr_b2', name: 'b2', group: 'build', maxLoad: 2, maxParallelSteps: 1 });
    await insertRunner(pool, { id: 'rnr_b3', name: 'b3', group: 'build', maxLoad: 2, maxParallelSteps: 1 });
    await fleetDrainSet(pool, { runner: 'rnr_b3', drained: true, actor: 'test' });
    await insertRunner(pool, { id: 'rnr_d1', name: 'd1', group: 'deploy', maxLoad: 4, maxParallelSteps: 1 });
    await insertRunner(pool, { id: 'rnr_o1', name: 'o1', group: 'old', maxLoad: 4, state: 'offline', maxParallelSteps: 1 });
    await insertLease(pool, { stepId: 900_001, runId: 900_001, runnerId: 'rnr_b1', load: 2, pools: ['db'] });
    await insertLease(pool, { stepId: 900_002, runId: 900_002, runnerId: 'rnr_b2', load: 2 });
    await pool.query(`UPDATE step_leases SET executing = true WHERE step_id = 900002`);
    await poolLimitSet(pool, { name: 'db', limit: 1 });
    await pool.query(`INSERT INTO pool_holds (pool, step_id, attempt) VALUES ('db', 900001, 1)`);
    seeded = {
      capacity: await seedRun(pool, { placement: { group: 'build' }, steps: steps('c', 5) }),
      pooled: await seedRun(pool, { placement: { group: 'build' }, steps: steps('p', 3, { pools: ['db'] }) }),
      gpu: await seedRun(pool, { placement: { labels: ['gpu'] }, steps: steps('g', 4) }),
      deploy: await seedRun(pool, { placement: { group: 'deploy' }, steps: steps('d', 3) }),
      old: await seedRun(pool, { placement: { group: 'old' }, steps: steps('o', 2) }),
    };
    // The capacity-bound build steps have waited two minutes.
    await pool.query(`UPDATE queue_ready SET ready_at = now() - interval '120 seconds' WHERE run_id = $1`, [seeded.capacity.runId]);
    server = await startTestServer(db.current.url, { plan: { metrics: { defaultMetrics: false } } });
  });
  afterAll(async () => {
    await server?.stop();
  });

  const zero = Object.fromEntries(DEMAND_REASONS.map((r) => [r, 0]));

  it('counts each group by reason, with runner states, leases and the oldest capacity-bound wait', async () => {
    const view = await fleetDemand(ctx, {});
    const byGroup = Object.fromEntries(view.groups.map((g) => [g.group, g]));
    expect(Object.keys(byGroup)).toEqual(['(unmatched)', 'build', 'deploy', 'old']);
    expect(byGroup.build).toMatchObject({ capacity: 5, blocked: 3, byReason: { ...zero, capacity: 5, pool: 3 }, leased: 1, running: 1, runners: { idle: 0, busy: 2, drained: 1, offline: 0 } });
    expect(byGroup.build.oldestCapacityWaitSeconds).toBeGreaterThanOrEqual(120);
    expect(byGroup.build.stepsWanted).toBe(7);
    expect(byGroup.build.oldestCapacityWaitSeconds).toBeLessThan(180);
    // One slot on the idle deploy runner: one starts, the two behind it wait for capacity.
    expect(byGroup.deploy).toMatchObject({ capacity: 2, blocked: 0, byReason: { ...zero, starting: 1, capacity: 2 }, runners: { idle: 1, busy: 0, drained: 0, offline: 0 } });
    expect(byGroup.deploy.oldestCapacityWaitSeconds).toBeLessThan(60);
    expect(byGroup.old).toMatchObject({ capacity: 0, blocked: 2, byReason: { ...zero, offline: 2 }, runners: { idle: 0, busy: 0, drained: 0, offline: 1 }, oldestCapacityWaitSeconds: 0 });
    expect(byGroup['(unmatched)']).toMatchObject({ capacity: 0, blocked: 4, byReason: { ...zero, unmatched: 4 } });
    expect(view.total).toMatchObject({ capacity: 7, blocked: 9, leased: 1, running: 1, runners: { idle: 1, busy: 2, drained: 1, offline: 1 } });
    expect(view.shapes.map((s) => [s.requirement, s.capacity])).toEqual([
      [{ group: 'build' }, 5],
      [{ group: 'deploy' }, 2],
    ]);
  });

  it('a queue deeper than the bound is read in claim order up to it and the rest judged by shape in SQL', async () => {
    const s = await capacityRead(db.current.pool, { limit: 5 });
    expect(s.ready.map((e) => e.runId)).toEqual(Array(5).fill(seeded.capacity.runId));
    const view = buildFleetDemand(s, demandOf(s, { acceptExceeding: true }));
    expect(view.judgedByShape).toBe(12);
    const byGroup = Object.fromEntries(view.groups.map((g) => [g.group, g]));
    expect(byGroup.build.byReason).toEqual({ ...zero, capacity: 5, pool: 3 });
    // Beyond the bound nothing is planned: the deploy step that would start counts as capacity.
    expect(byGroup.deploy.byReason).toEqual({ ...zero, capacity: 3 });
    expect(byGroup.old.byReason).toEqual({ ...zero, offline: 2 });
    expect(byGroup['(unmatched)'].byReason).toEqual({ ...zero, unmatched: 4 });
    expect(view.total).toMatchObject({ capacity: 8, blocked: 9 });
  });

  it('--group keeps that row; an unknown group is not found (exit 3), named', async () => {
    const view = await fleetDemand(ctx, { group: 'deploy' });
    expect(view.groups.map((g) => g.group)).toEqual(['deploy']);
    const r = await runInProcess(['fleet', 'demand', '--group', 'nosuch', '--json', '--database-url', db.current.url]);
    expect(r.code).toBe(3);
    expect(JSON.parse(r.stdout).error.message).toContain('nosuch');
  });

  it('an entry two groups could serve counts in both rows and once in the total', async () => {
    const pool = db.current.pool;
    await insertRunner(pool, { id: 'rnr_x1', name: 'x1', group: 'extra', labels: ['both'], maxLoad: 1, maxParallelSteps: 1 });
    await insertRunner(pool, { id: 'rnr_y1', name: 'y1', group: 'other', labels: ['both'], maxLoad: 1, maxParallelSteps: 1 });
    await insertLease(pool, { stepId: 900_003, runId: 900_003, runnerId: 'rnr_x1', load: 1 });
    await insertLease(pool, { stepId: 900_004, runId: 900_004, runnerId: 'rnr_y1', load: 1 });
    const both = await seedRun(pool, { placement: { labels: ['both'] }, steps: steps('b', 1) });
    try {
      const view = await fleetDemand(ctx, {});
      const byGroup = Object.fromEntries(view.groups.map((g) => [g.group, g]));
      expect(byGroup.extra.capacity).toBe(1);
      expect(byGroup.other.capacity).toBe(1);
      expect(view.total.capacity).toBe(8);
    } finally {
      await pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [both.runId]);
      await pool.query(`DELETE FROM step_leases WHERE step_id IN (900003, 900004)`);
      await pool.query(`DELETE FROM runners WHERE id IN ('rnr_x1', 'rnr_y1')`);
    }
  });

  it('/metrics carries opschain_group_demand and opschain_group_oldest_wait_seconds, labels bounded to existing groups and the fixed reasons', async () => {
    const families = parsePrometheus(await (await fetch(`${server.url}/metrics`)).text());
    const demand = families.get('opschain_group_demand')!;
    const groups = new Set(demand.samples.map((s) => s.labels.group));
    expect([...groups].sort()).toEqual(['(unmatched)', 'build', 'deploy', 'old']);
    expect(new Set(demand.samples.map((s) => s.labels.reason))).toEqual(new Set(DEMAND_REASONS));
    expect(demand.samples).toHaveLength(4 * DEMAND_REASONS.length);
    const value = (group: string, reason: string) => demand.samples.find((s) => s.labels.group === group && s.labels.reason === reason)?.value;
    expect([value('build', 'capacity'), value('build', 'pool'), value('deploy', 'starting'), value('deploy', 'capacity'), value('(unmatched)', 'unmatched'), value('old', 'offline')]).toEqual([5, 3, 1, 2, 4, 2]);
    const oldest = families.get('opschain_group_oldest_wait_seconds')!;
    expect(oldest.samples.map((s) => s.labels.group).sort()).toEqual(['(unmatched)', 'build', 'deploy', 'old']);
    expect(oldest.samples.find((s) => s.labels.group === 'build')!.value).toBeGreaterThanOrEqual(120);
    expect(oldest.samples.find((s) => s.labels.group === 'old')!.value).toBe(0);
    const runners = families.get('opschain_group_runners')!;
    expect(runners.samples.filter((s) => s.labels.group === 'build').map((s) => [s.labels.state, s.value])).toEqual([['idle', 0], ['busy', 2], ['drained', 1], ['offline', 0]]);

    // A run file that names a group nobody registered adds no series: its work is "(unmatched)".
    const made = await seedRun(db.current.pool, { placement: { group: 'made-up-by-a-run-file' }, steps: steps('m', 1) });
    const again = parsePrometheus(await (await fetch(`${server.url}/metrics`)).text()).get('opschain_group_demand')!;
    expect(new Set(again.samples.map((s) => s.labels.group))).toEqual(groups);
    expect(again.samples.find((s) => s.labels.group === '(unmatched)' && s.labels.reason === 'unmatched')!.value).toBe(5);
    await db.current.pool.query(`DELETE FROM queue_ready WHERE run_id = $1`, [made.runId]);
  });
});
