import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { PlacementRequirement, Waiter } from '../../src/core/entry.js';
import { planDelivery } from '../../src/core/plan.js';
import { RecentlyClaimable, unblockOnce } from '../../src/dispatch/blocked.js';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { Offer } from '../../src/dispatch/offers.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { fleetDrainSet, queueVerdictInputsRead } from '../../src/store/fleet.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { poolSlotsFree, poolLimitSet } from '../../src/store/pools.js';
import { mapEntry } from '../../src/store/queue.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner, type RunnerFixture } from '../support/fleet.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';

const ALL_SHARDS = Array.from({ length: 64 }, (_, i) => i);

describe('entries no runner can take are set aside, and never hide what an idle runner could take', () => {
  const db = useTestDatabase();
  let pool: Pool;
  /** Another replica's connections: what it changes is seen here only through the store. */
  let other: Pool;
  let deps: Dispatcher;

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    other = createPool(db.current.url, { max: 2 });
  });
  afterAll(async () => {
    await pool.end();
    await other.end();
  });
  beforeEach(async () => {
    await other.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits, runners, runner_groups`);
    await postureLever(other, { fields: ['halted', 'quiesced', 'system_quiesced'], value: false, actor: 'test' });
    deps = testDispatchDeps(pool, { replicaId: 'replica-blocked', acceptExceeding: true });
  });

  const runner = async (f: RunnerFixture): Promise<RunnerRow> => {
    await insertRunner(other, f);
    return mapRunner((await other.query(`SELECT * FROM runners WHERE id = $1`, [f.id])).rows[0]);
  };
  const park = (r: RunnerRow, slots: number, onlyRunId: number | null = null) =>
    deps.registry.park({ runner: r, requestId: `${r.id}-${Math.random()}`, slots, onlyRunId, parkedAt: Date.now() }, 30_000);
  const blockedOn = async () =>
    Object.fromEntries((await other.query(`SELECT coalesce(blocked_on, 'claimable') AS k, count(*)::int AS n FROM queue_ready GROUP BY 1`)).rows.map((r) => [r.k, r.n]));

  /**
   * The estate of the report: a pool at its limit (its holder running), entries for a label no
   * runner has, entries for a drained group (some in the system lane), and an idle runner `vm`.
   */
  async function blockedEstate() {
    const vm = await runner({ id: 'rnr_vm', name: 'vm', maxLoad: 2 });
    const busy = await runner({ id: 'rnr_holder', name: 'holder', maxLoad: 8 });
    await runner({ id: 'rnr_old', name: 'old', group: 'legacy', maxLoad: 8 });
    await fleetDrainSet(other, { group: 'legacy', drained: true, reason: 'retiring', actor: 'test' });
    await poolLimitSet(other, { name: 'db', limit: 1 });
    const holder = await seedRun(other, { steps: [{ name: 'migrate', pools: ['db'] }] });
    const held = park(busy, 1);
    expect((await deps.tick()).delivered).toBe(1);
    expect((await held.offers).map((o) => o.step_id)).toEqual(holder.stepIds);
    const pooled = await seedRun(other, { priority: 60, steps: Array.from({ length: 60 }, (_, i) => ({ name: `p${i}`, pools: ['db'] })) });
    const gpu = await seedRun(other, { placement: { labels: ['gpu'] }, steps: Array.from({ length: 75 }, (_, i) => ({ name: `g${i}` })) });
    const legacy = await seedRun(other, { placement: { group: 'legacy' }, steps: Array.from({ length: 30 }, (_, i) => ({ name: `l${i}` })) });
    const urgent = await seedRun(other, { priority: 150, placement: { group: 'legacy' }, steps: Array.from({ length: 5 }, (_, i) => ({ name: `u${i}` })) });
    return { vm, busy, holder, pooled, gpu, legacy, urgent };
  }

  it('a plain run behind 170 blocked entries of every kind reaches the idle runner in one tick; the next tick claims only it', async () => {
    const { vm } = await blockedEstate();
    const plain = await seedRun(other, { steps: [{ name: 'hello' }] });
    const call = park(vm, 2);
    const tick = await deps.tick();
    expect(tick.delivered).toBe(1);
    expect((await call.offers).map((o: Offer) => o.step_id)).toEqual(plain.stepIds);
    expect(tick.blocked).toBe(170);
    expect(await blockedOn()).toEqual({ 'pool:db': 60, fleet: 110 });

    // Set aside, they cost the next tick nothing: it claims the new plain step alone.
    const second = await seedRun(other, { steps: [{ name: 'hello-again' }] });
    const again = park(vm, 1);
    const next = await deps.tick();
    expect(next).toMatchObject({ claimed: 1, delivered: 1, blocked: 0 });
    expect((await again.offers).map((o) => o.step_id)).toEqual(second.stepIds);
  });

  it('a check with nothing changed returns nothing; each kind of change returns its own entries', async () => {
    const { vm, busy, holder, gpu, legacy, urgent } = await blockedEstate();
    park(vm, 2);
    await deps.tick();
    deps.registry.drainAll();
    expect(await blockedOn()).toEqual({ 'pool:db': 60, fleet: 110 });
    expect(await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true })).toEqual({ blocked: 170, returned: 0 });

    // A runner with the label registers: the 75 come back, and it takes them.
    const gpuRunner = await runner({ id: 'rnr_gpu', name: 'gpu-1', labels: ['gpu'], maxLoad: 100 });
    expect(await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true })).toEqual({ blocked: 170, returned: 75 });
    const g = park(gpuRunner, 100);
    await deps.tick();
    expect((await g.offers).map((o) => o.step_id).sort()).toEqual([...gpu.stepIds].sort());

    // The group is undrained: its 35 come back, the system lane's five first.
    await fleetDrainSet(other, { group: 'legacy', drained: false, actor: 'test' });
    expect(await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true })).toEqual({ blocked: 95, returned: 35 });
    const old = mapRunner((await other.query(`SELECT * FROM runners WHERE id = 'rnr_old'`)).rows[0]);
    const o = park(old, 5);
    await deps.tick();
    expect((await o.offers).map((x) => x.step_id)).toEqual(urgent.stepIds);
    expect(legacy.stepIds).toHaveLength(30);

    // Another replica releases the pool (its holder finished there): the pool's entries come
    // back, one takes the hold, the rest are set aside again.
    expect(await poolSlotsFree(other, holder.stepIds)).toBe(1);
    await other.query(`DELETE FROM step_leases WHERE step_id = ANY($1::bigint[])`, [holder.stepIds]);
    expect((await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true })).returned).toBe(60);
    const b = park(busy, 8);
    const tick = await deps.tick();
    expect((await b.offers).length).toBe(1);
    expect(tick.blocked).toBe(59);
  });

  it('under a posture nothing is claimed or set aside; once it is lifted the waiting entry is offered at once', async () => {
    const vm = await runner({ id: 'rnr_vm', name: 'vm', maxLoad: 2 });
    const plain = await seedRun(other, { steps: [{ name: 'hello' }] });
    await postureLever(other, { fields: ['halted'], value: true, actor: 'test', reason: 'incident' });
    const held = park(vm, 1);
    expect(await deps.tick()).toMatchObject({ stoppedBy: 'halted', delivered: 0, blocked: 0 });
    expect(await blockedOn()).toEqual({ claimable: 1 });
    deps.registry.drainAll();
    expect(await held.offers).toEqual([]);
    await postureLever(other, { fields: ['halted'], value: false, actor: 'test' });
    const call = park(vm, 1);
    expect((await deps.tick()).delivered).toBe(1);
    expect((await call.offers).map((o) => o.step_id)).toEqual(plain.stepIds);
  });

  it('a run at its cap is set aside on its run and comes back when one of its steps ends', async () => {
    const a = await runner({ id: 'rnr_a', name: 'a', maxLoad: 8 });
    const scoped = await seedRun(other, { scope: 'run', maxParallelSteps: 1, steps: [{ name: 's1' }, { name: 's2' }] });
    const first = park(a, 4);
    expect(await deps.tick()).toMatchObject({ delivered: 1, blocked: 1 });
    const [offer] = await first.offers;
    expect(await blockedOn()).toEqual({ [`run:${scoped.runId}`]: 1 });
    expect((await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true })).returned).toBe(0);
    await other.query(`DELETE FROM step_leases WHERE step_id = $1`, [offer.step_id]);
    // The check by key, as after a lease of the run ends here: another key finds nothing, the run's own returns it.
    expect(await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true, keys: ['run:999999'] })).toEqual({ blocked: 0, returned: 0 });
    expect(await unblockOnce(pool, { shards: ALL_SHARDS, acceptExceeding: true, keys: [`run:${scoped.runId}`] })).toEqual({ blocked: 1, returned: 1 });
    const second = park(a, 4);
    expect((await deps.tick()).delivered).toBe(1);
    expect((await second.offers).map((o) => o.step_id)).toEqual([scoped.stepIds[1]]);
  });

  it('a shape judged claimable (its runner only busy) is not judged again each tick, and is once the memory lapses', async () => {
    let now = 1_000_000;
    deps = testDispatchDeps(pool, { replicaId: 'replica-blocked', acceptExceeding: true, recentlyClaimable: new RecentlyClaimable(() => now) });
    await runner({ id: 'rnr_build', name: 'build-1', labels: ['build'] });
    const idle = await runner({ id: 'rnr_idle', name: 'idle', labels: ['other'] });
    await seedRun(other, { placement: { labels: ['build'] }, steps: [{ name: 'b1' }] });
    const tickOnce = async () => {
      park(idle, 1);
      const t = await deps.tick();
      deps.registry.drainAll();
      return t;
    };
    // build-1 is registered but not parked: waiting for it is waiting for capacity.
    expect(await tickOnce()).toMatchObject({ delivered: 0, blocked: 0 });
    await fleetDrainSet(other, { runner: 'rnr_build', drained: true, actor: 'test' });
    expect(await tickOnce()).toMatchObject({ delivered: 0, blocked: 0 });
    now += 1_001;
    expect(await tickOnce()).toMatchObject({ delivered: 0, blocked: 1 });
    expect(await blockedOn()).toEqual({ fleet: 1 });
  });

  it('after one tick, no entry a parked runner with free capacity could take is left while that runner gets nothing (random queues and fleets)', async () => {
    const LABELS = ['linux', 'gpu', 'arm'];
    const runnerArb = fc.record({
      labels: fc.subarray(LABELS),
      group: fc.constantFrom(null, 'build', 'legacy'),
      maxLoad: fc.integer({ min: 1, max: 4 }),
      state: fc.constantFrom('online', 'online', 'watch', 'offline'),
      slots: fc.integer({ min: 0, max: 3 }),
    });
    const entryArb = fc.record({
      labels: fc.subarray([...LABELS, 'none-has-it'], { maxLength: 2 }),
      group: fc.constantFrom(undefined, 'build', 'legacy'),
      pool: fc.constantFrom(null, null, 'db', 'cache'),
      load: fc.constantFrom(1, 1, 2, 5),
      priority: fc.constantFrom(0, 60, 150),
      scope: fc.constantFrom('step', 'step', 'run'),
    });
    const caseArb = fc.record({
      runners: fc.array(runnerArb, { minLength: 1, maxLength: 4 }),
      entries: fc.array(entryArb, { minLength: 1, maxLength: 40 }),
      legacyDrained: fc.boolean(),
      dbLimit: fc.integer({ min: 0, max: 2 }),
    });
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        await other.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits, runners, runner_groups`);
        deps = testDispatchDeps(pool, { replicaId: 'replica-blocked', acceptExceeding: true });
        const rows: RunnerRow[] = [];
        for (const [i, r] of c.runners.entries()) rows.push(await runner({ id: `rnr_${i}`, labels: r.labels, group: r.group, maxLoad: r.maxLoad, state: r.state as RunnerFixture['state'] }));
        await other.query(`INSERT INTO runner_groups (name, drained) VALUES ('legacy', $1)`, [c.legacyDrained]);
        await poolLimitSet(other, { name: 'db', limit: c.dbLimit });
        for (const e of c.entries) {
          const placement: PlacementRequirement = { ...(e.labels.length ? { labels: e.labels } : {}), ...(e.group ? { group: e.group } : {}) };
          await seedRun(other, { priority: e.priority, scope: e.scope as 'step' | 'run', placement, steps: [{ name: 's', load: e.load, pools: e.pool ? [e.pool] : [] }] });
        }
        const calls = rows.map((r, i) => ({ r, slots: c.runners[i].slots })).filter((x) => x.slots > 0).map((x) => ({ ...x, call: park(x.r, x.slots) }));
        await deps.tick();
        deps.registry.drainAll();
        const got = await Promise.all(calls.map((x) => x.call.offers));
        // The oracle is the planner itself, over what is left and the store as it is now, for
        // each call that got nothing: it must find nothing that call alone could take.
        const left = (await other.query(`SELECT * FROM queue_ready ORDER BY lane, position`)).rows.map(mapEntry);
        const inputs = await queueVerdictInputsRead(other, { runIds: left.map((e) => e.runId), pools: left.flatMap((e) => e.pools), posture: false });
        for (const [i, x] of calls.entries()) {
          if (got[i].length > 0) continue;
          const f = inputs.runners.find((r) => r.runnerId === x.r.id)!;
          const w: Waiter = { ...f, slots: x.slots, onlyRunId: null };
          const plan = planDelivery({ claims: left, waiters: [w], pools: inputs.pools, pins: inputs.pins, outstandingByRun: inputs.outstandingByRun, acceptExceeding: true, fleet: inputs.runners, runnerRuns: inputs.runnerRuns });
          expect(plan.deliveries.map((d) => d.entry.stepId), `runner ${x.r.id} got nothing`).toEqual([]);
        }
      }),
      { numRuns: 30 },
    );
  });
});
