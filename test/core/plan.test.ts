import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { QueueEntry, Waiter } from '../../src/core/entry.js';
import { placementMatches } from '../../src/core/placement.js';
import { planDelivery, type PlanInput, type PoolState } from '../../src/core/plan.js';
import { FairShare } from '../../src/core/stride.js';
import { entry, requirementArb, waiter } from './arbitraries.js';

function plan(p: Partial<PlanInput> & Pick<PlanInput, 'claims' | 'waiters'>) {
  return planDelivery({ pools: new Map(), pins: new Map(), outstandingByRun: new Map(), acceptExceeding: true, ...p });
}

const byRunner = (deliveries: ReturnType<typeof plan>['deliveries']) => {
  const m = new Map<string, QueueEntry[]>();
  for (const d of deliveries) m.set(d.waiter.runnerId, [...(m.get(d.waiter.runnerId) ?? []), d.entry]);
  return m;
};

describe('planDelivery', () => {
  it('every claim ends up exactly once: delivered or returned', () => {
    fc.assert(
      fc.property(fc.array(fc.record({ priority: fc.integer({ min: 0, max: 199 }), load: fc.constantFrom(0.5, 1, 2, 5) }), { maxLength: 30 }), fc.integer({ min: 0, max: 5 }), (specs, n) => {
        const claims = specs.map((s) => entry(s));
        const waiters = Array.from({ length: n }, (_, i) => waiter({ runnerId: `r${i}`, slots: 2, maxLoad: 4 }));
        const out = plan({ claims, waiters });
        const ids = [...out.deliveries.map((d) => d.entry.stepId), ...out.returned.map((r) => r.entry.stepId)].sort((a, b) => a - b);
        expect(ids).toEqual(claims.map((c) => c.stepId).sort((a, b) => a - b));
      }),
    );
  });

  it('never inverts lanes: with room for all of them, the higher lanes go first', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 199 }), { minLength: 1, maxLength: 30 }), fc.integer({ min: 1, max: 10 }), (prios, slots) => {
        const claims = prios.map((priority) => entry({ priority }));
        const out = plan({ claims, waiters: [waiter({ runnerId: 'r0', slots, maxLoad: 100 })] });
        const maxDelivered = Math.max(...out.deliveries.map((d) => d.entry.lane));
        for (const r of out.returned) expect(r.entry.lane).toBeGreaterThanOrEqual(maxDelivered);
      }),
    );
  });

  it('never inverts lanes under placement: a lower lane went to a runner only if the higher-lane claim could not use it', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ priority: fc.constantFrom(0, 60, 150), requirement: requirementArb }), { maxLength: 25 }),
        fc.array(fc.record({ group: fc.option(fc.constantFrom('build', 'deploy', 'prod')), labels: fc.subarray(['linux', 'arm', 'gpu', 'db-access']), slots: fc.integer({ min: 1, max: 3 }) }), { maxLength: 4 }),
        (specs, ws) => {
          const claims = specs.map((s) => entry(s));
          const waiters = ws.map((w, i) => waiter({ runnerId: `r${i}`, ...w, executors: ['shell', 'docker'], maxLoad: 100 }));
          const out = plan({ claims, waiters });
          for (const d of out.deliveries) {
            for (const r of out.returned) {
              if (r.entry.lane < d.entry.lane) expect(placementMatches(r.entry.requirement, d.waiter)).toBe(false);
            }
          }
        },
      ),
    );
  });

  it('never over-admits a pool: held plus planned stays within every limit, all or none per step', () => {
    fc.assert(
      fc.property(
        fc.array(fc.subarray(['a', 'b', 'c', 'd']), { maxLength: 30 }),
        fc.record({ a: fc.integer({ min: 0, max: 3 }), b: fc.integer({ min: 0, max: 5 }), c: fc.integer({ min: 0, max: 2 }) }),
        fc.record({ a: fc.integer({ min: 0, max: 4 }), b: fc.integer({ min: 0, max: 2 }), c: fc.integer({ min: 0, max: 2 }) }),
        (poolLists, limits, held) => {
          const pools: PoolState = new Map(Object.entries(limits).map(([name, limit]) => [name, { limit, held: held[name as 'a'] }]));
          const claims = poolLists.map((ps) => entry({ pools: ps }));
          const out = plan({ claims, waiters: [waiter({ runnerId: 'r0', slots: 100, maxLoad: 1000 })], pools });
          for (const [name, p] of pools) {
            const taken = out.deliveries.filter((d) => d.entry.pools.includes(name)).length;
            expect(p.held + taken <= p.limit || taken === 0).toBe(true);
          }
          // d is unlimited (no limit row): it never holds a claim back.
          for (const r of out.returned) expect(r.reason).toMatch(/^pool full: [abc] \(\d+\/\d+\)$/);
        },
      ),
    );
  });

  it('never loads a runner past max_load, except one step larger than every max_load on an idle most capable runner', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(0.25, 0.5, 1, 1.5, 2, 3, 6, 10), { maxLength: 30 }),
        fc.array(fc.record({ maxLoad: fc.constantFrom(1, 2, 4, 8), runningLoad: fc.constantFrom(0, 0, 0.5, 1, 3), slots: fc.integer({ min: 1, max: 6 }) }), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        (loads, ws, acceptExceeding) => {
          const claims = loads.map((load) => entry({ load }));
          const waiters = ws.map((w, i) => waiter({ runnerId: `r${i}`, ...w, runningLoad: Math.min(w.runningLoad, w.maxLoad) }));
          const out = plan({ claims, waiters, acceptExceeding });
          const largest = Math.max(...waiters.map((w) => w.maxLoad));
          for (const [id, entries] of byRunner(out.deliveries)) {
            const w = waiters.find((x) => x.runnerId === id)!;
            const total = w.runningLoad + entries.reduce((s, e) => s + e.load, 0);
            const exceeding = out.deliveries.filter((d) => d.waiter.runnerId === id && d.exceedsMaxLoad);
            if (exceeding.length === 0) {
              expect(total).toBeLessThanOrEqual(w.maxLoad + 1e-9);
            } else {
              expect(acceptExceeding).toBe(true);
              expect(entries).toHaveLength(1);
              expect(w.runningLoad).toBe(0);
              expect(w.maxLoad).toBe(largest);
              expect(entries[0].load).toBeGreaterThan(largest);
            }
          }
          if (!acceptExceeding) for (const r of out.returned.filter((x) => x.entry.load > largest && x.code !== 'no_waiter_matches' && x.code !== 'slots_taken')) expect(r.reason).toBe('exceeds max load');
        },
      ),
    );
  });

  it('run pinning: one runner per run, never past max_parallel, siblings of a new pin follow it in the same plan', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ run: fc.integer({ min: 1, max: 4 }) }), { maxLength: 20 }),
        fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 4 }),
        fc.array(fc.option(fc.constantFrom('r0', 'r1', 'r2'), { freq: 1 }), { minLength: 4, maxLength: 4 }),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 4, maxLength: 4 }),
        (specs, caps, pinList, outs) => {
          const pins = new Map<number, string>();
          const outstanding = new Map<number, number>();
          pinList.forEach((p, i) => {
            if (p) {
              pins.set(i + 1, p);
              outstanding.set(i + 1, outs[i]);
            }
          });
          const claims = specs.map((s) => entry({ runId: s.run, runScope: true, maxParallel: caps[s.run - 1] }));
          const waiters = ['r0', 'r1', 'r2'].map((id) => waiter({ runnerId: id, slots: 5, maxLoad: 100 }));
          const out = plan({ claims, waiters, pins, outstandingByRun: outstanding });
          for (let run = 1; run <= 4; run++) {
            const ds = out.deliveries.filter((d) => d.entry.runId === run);
            const runners = new Set(ds.map((d) => d.waiter.runnerId));
            expect(runners.size).toBeLessThanOrEqual(1);
            if (pins.has(run) && ds.length) expect([...runners][0]).toBe(pins.get(run));
            expect((outstanding.get(run) ?? 0) + ds.length <= caps[run - 1] || ds.length === 0).toBe(true);
            expect(ds.filter((d) => d.pin)).toHaveLength(!pins.has(run) && ds.length ? 1 : 0);
            if (ds.length) expect(ds[0].pin).toBe(!pins.has(run));
          }
        },
      ),
    );
  });

  it('a claim whose parked matches have no slot left is returned for capacity, apart from one no parked call matches', () => {
    const w = waiter({ runnerId: 'w', labels: ['linux'], slots: 1 });
    const claims = [entry({ requirement: { labels: ['linux'] } }), entry({ requirement: { labels: ['linux'] } }), entry({ requirement: { labels: ['gpu'] } })];
    const out = plan({ claims, waiters: [w] });
    expect(out.deliveries).toHaveLength(1);
    expect(out.returned.map((r) => r.code)).toEqual(['slots_taken', 'no_waiter_matches']);
  });

  it('an exclusive group runner takes only work targeted at its group', () => {
    const excl = waiter({ runnerId: 'x', group: 'prod', exclusive: true, slots: 5 });
    const untargeted = [entry({}), entry({ requirement: { labels: [] } }), entry({ requirement: { group: 'build' } })];
    const targeted = [entry({ requirement: { group: 'prod' } }), entry({ requirement: { group: ['build', 'prod'] } })];
    const out = plan({ claims: [...untargeted, ...targeted], waiters: [excl] });
    expect(out.deliveries.map((d) => d.entry.stepId).sort()).toEqual(targeted.map((e) => e.stepId).sort());
    expect(out.returned.map((r) => r.reason)).toEqual(['no parked runner matches', 'no parked runner matches', 'no parked runner matches']);
  });

  it('never hands work to a drained runner or a runner of a drained group', () => {
    const claims = [entry({}), entry({}), entry({})];
    const waiters: Waiter[] = [waiter({ runnerId: 'a', drained: true, slots: 3 }), waiter({ runnerId: 'b', slots: 3 }), waiter({ runnerId: 'c', group: 'g', slots: 3 })];
    const out = plan({ claims, waiters, drains: { runners: new Set(['b']), groups: new Set(['g']) } });
    expect(out.deliveries).toEqual([]);
    expect(out.returned).toHaveLength(3);
  });

  it('the least loaded waiter wins; near ties within 0.01 go to the larger max_load', () => {
    const busy = waiter({ runnerId: 'busy', maxLoad: 4, runningLoad: 2 });
    const light = waiter({ runnerId: 'light', maxLoad: 4, runningLoad: 1 });
    expect(plan({ claims: [entry({})], waiters: [busy, light] }).deliveries[0].waiter.runnerId).toBe('light');
    const small = waiter({ runnerId: 'a-small', maxLoad: 100, runningLoad: 50 });
    const big = waiter({ runnerId: 'z-big', maxLoad: 200, runningLoad: 101 }); // 0.505 vs 0.5: a near tie
    expect(plan({ claims: [entry({})], waiters: [small, big] }).deliveries[0].waiter.runnerId).toBe('z-big');
  });

  it('a step too big for the runner right now stays queued as busy; one larger than every runner is flagged or held', () => {
    const w = waiter({ runnerId: 'r', maxLoad: 4, runningLoad: 3 });
    expect(plan({ claims: [entry({ load: 2 })], waiters: [w] }).returned[0].reason).toBe('every matching parked runner is busy by load');
    const idle = waiter({ runnerId: 'r', maxLoad: 4 });
    const big = entry({ load: 6 });
    const on = plan({ claims: [big], waiters: [idle], acceptExceeding: true });
    expect(on.deliveries[0]).toMatchObject({ exceedsMaxLoad: true });
    const off = plan({ claims: [big], waiters: [idle], acceptExceeding: false });
    expect(off.returned[0]).toMatchObject({ code: 'exceeds_max_load', reason: 'exceeds max load' });
    // A more capable runner exists but is not parked: the small idle one must not take it.
    const fleet = [{ ...idle }, { ...waiter({ runnerId: 'huge', maxLoad: 8 }) }];
    expect(plan({ claims: [big], waiters: [idle], fleet }).returned[0].code).toBe('busy_by_load');
    const bigger = entry({ load: 10 });
    expect(plan({ claims: [bigger], waiters: [idle], fleet }).returned[0].reason).toBe('exceeds max load: waits for huge (max_load 8) to be idle');
  });

  it('a run-restricted poll takes only its run', () => {
    const w = waiter({ runnerId: 'r', onlyRunId: 7, slots: 3 });
    const out = plan({ claims: [entry({ runId: 6 }), entry({ runId: 7 })], waiters: [w] });
    expect(out.deliveries.map((d) => d.entry.runId)).toEqual([7]);
  });

  it('two parallel branches of a fresh run-scoped run pin to one runner, a third waits past the cap', () => {
    const claims = [1, 2, 3].map(() => entry({ runId: 42, runScope: true, maxParallel: 2 }));
    const waiters = [waiter({ runnerId: 'a', slots: 3 }), waiter({ runnerId: 'b', slots: 3 }), waiter({ runnerId: 'c', slots: 1 })];
    const out = plan({ claims, waiters });
    expect(out.deliveries).toHaveLength(2);
    expect(new Set(out.deliveries.map((d) => d.waiter.runnerId)).size).toBe(1);
    expect(out.deliveries.map((d) => d.pin)).toEqual([true, false]);
    expect(out.returned[0].reason).toBe('run at max_parallel_steps (2/2)');
  });

  it('a runner executing a run-scoped run takes no other run until it is done, whatever its polls ask', () => {
    const w = waiter({ runnerId: 'r', slots: 4, maxLoad: 10 });
    const claims = [entry({ runId: 5 }), entry({ runId: 9, runScope: true, maxParallel: 3 }), entry({ runId: 6, runScope: true })];
    const busy = plan({ claims, waiters: [w], runnerRuns: new Map([['r', 9]]), pins: new Map([[9, 'r']]), outstandingByRun: new Map([[9, 1]]) });
    expect(busy.deliveries.map((d) => d.entry.runId)).toEqual([9]);
    // Free: the first scoped run it receives binds it for the rest of the plan too.
    const free = plan({ claims, waiters: [w] });
    expect(free.deliveries.map((d) => d.entry.runId)).toEqual([5, 9]);
  });

  it('uses the dispatcher fair-share state without changing it', () => {
    const fair = new FairShare();
    fair.charge(2, 'a', 1);
    fair.charge(2, 'a', 1);
    const claims = [entry({ fairKey: 'a', position: 1 }), entry({ fairKey: 'b', position: 2 })];
    const out = plan({ claims, waiters: [waiter({ runnerId: 'r' })], fairShare: fair });
    expect(out.deliveries[0].entry.fairKey).toBe('b');
    expect(fair.passOf(2, 'b')).toBe(fair.passOf(2, 'zzz'));
  });
});
