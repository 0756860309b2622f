import fc from 'fast-check';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { fleetWhatIf, type WhatIfInput } from '../../src/ops/domain/capacity.js';
import type { OpsContext } from '../../src/ops/domain/context.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { poolLimitSet } from '../../src/store/pools.js';
import { mapRunner } from '../../src/store/runners.js';
import { runnersRemove } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';
import { runInProcess } from '../support/inproc.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';

const GROUPS = ['a', 'b'] as const;

interface RunnerSpec { group: (typeof GROUPS)[number]; label: boolean; maxLoad: number; maxParallel: number; drained: boolean; offline: boolean; busyLoad: number }
interface RunSpec { group: (typeof GROUPS)[number] | null; label: boolean; scope: 'step' | 'run'; steps: Array<{ load: number; pool: boolean }> }
type Lever =
  | { kind: 'drain' | 'undrain' | 'remove'; runner: number }
  | { kind: 'drainGroup' | 'undrainGroup'; group: (typeof GROUPS)[number] }
  | { kind: 'pool'; limit: number }
  | { kind: 'add'; count: number; group: (typeof GROUPS)[number]; label: boolean; maxLoad: number };

const runnerSpec = fc.record({
  group: fc.constantFrom(...GROUPS),
  label: fc.boolean(),
  maxLoad: fc.constantFrom(1, 2, 4),
  maxParallel: fc.constantFrom(1, 2),
  drained: fc.boolean(),
  offline: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  busyLoad: fc.constantFrom(0, 0, 1, 2),
});
const runSpec = fc.record({
  group: fc.constantFrom(...GROUPS, null),
  label: fc.boolean(),
  scope: fc.constantFrom('step' as const, 'step' as const, 'run' as const),
  steps: fc.array(fc.record({ load: fc.constantFrom(1, 1, 2, 3), pool: fc.boolean() }), { minLength: 1, maxLength: 3 }),
});
const lever = (runners: number): fc.Arbitrary<Lever> =>
  fc.oneof(
    fc.record({ kind: fc.constantFrom('drain' as const, 'undrain' as const, 'remove' as const), runner: fc.integer({ min: 0, max: runners - 1 }) }),
    fc.record({ kind: fc.constantFrom('drainGroup' as const, 'undrainGroup' as const), group: fc.constantFrom(...GROUPS) }),
    fc.record({ kind: fc.constant('pool' as const), limit: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('add' as const), count: fc.integer({ min: 1, max: 2 }), group: fc.constantFrom(...GROUPS), label: fc.boolean(), maxLoad: fc.constantFrom(1, 4) }),
  );
const state = fc
  .record({ runners: fc.array(runnerSpec, { minLength: 1, maxLength: 4 }), runs: fc.array(runSpec, { minLength: 1, maxLength: 5 }), poolLimit: fc.integer({ min: 0, max: 2 }) })
  .chain((s) => fc.record({ s: fc.constant(s), lever: lever(s.runners.length) }));

describe('fleet what-if', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let deps: Dispatcher;
  let ctx: OpsContext;

  beforeAll(() => {
    pool = createPool(db.current.url, { max: 4 });
    ctx = { pool, actor: 'test', source: 'test', acceptExceeding: true };
  });
  afterAll(async () => {
    await pool.end();
  });
  beforeEach(async () => {
    await pool.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits, runners, runner_groups, audit_log`);
    await postureLever(pool, { fields: ['halted', 'quiesced', 'system_quiesced'], value: false, actor: 'test' });
  });

  async function seed(s: { runners: RunnerSpec[]; runs: RunSpec[]; poolLimit: number }): Promise<void> {
    await pool.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits, runners, runner_groups`);
    await pool.query(`INSERT INTO runner_groups (name) VALUES ('a'), ('b')`);
    for (const [i, r] of s.runners.entries()) {
      await insertRunner(pool, { id: `rnr_${i}`, name: `r${i}`, group: r.group, labels: r.label ? ['x'] : [], maxLoad: r.maxLoad, drained: r.drained, state: r.offline ? 'offline' : 'online' });
      await pool.query(`UPDATE runners SET max_parallel_steps = $2 WHERE id = $1`, [`rnr_${i}`, r.maxParallel]);
      if (r.busyLoad > 0) await insertLease(pool, { stepId: 900_000 + i, runId: 900_000 + i, runnerId: `rnr_${i}`, load: r.busyLoad });
    }
    await poolLimitSet(pool, { name: 'db', limit: s.poolLimit });
    for (const run of s.runs) {
      const placement = { ...(run.group ? { group: run.group } : {}), ...(run.label ? { labels: ['x'] } : {}) };
      await seedRun(pool, { scope: run.scope, placement, steps: run.steps.map((st, j) => ({ name: `s${j}`, load: st.load, pools: st.pool ? ['db'] : [] })) });
    }
  }

  const input = (l: Lever): WhatIfInput => {
    switch (l.kind) {
      case 'drain':
        return { drain: `r${l.runner}` };
      case 'undrain':
        return { undrain: `r${l.runner}` };
      case 'remove':
        return { removeRunner: `r${l.runner}` };
      case 'drainGroup':
        return { drainGroup: l.group };
      case 'undrainGroup':
        return { undrainGroup: l.group };
      case 'pool':
        return { pool: `db=${l.limit}` };
      case 'add':
        return { addRunners: l.count, group: l.group, label: l.label ? 'x' : undefined, maxLoad: l.maxLoad };
    }
  };

  /** The lever pulled for real, as its own verb would (an added runner registers like its group's others). */
  async function pull(l: Lever, like: RunnerSpec[]): Promise<void> {
    switch (l.kind) {
      case 'drain':
      case 'undrain':
        return void (await fleetDrainSet(pool, { runner: `rnr_${l.runner}`, drained: l.kind === 'drain', actor: 'test' }));
      case 'drainGroup':
      case 'undrainGroup':
        return void (await fleetDrainSet(pool, { group: l.group, drained: l.kind === 'drainGroup', actor: 'test' }));
      case 'remove':
        return void (await runnersRemove(pool, { ids: [`rnr_${l.runner}`] }));
      case 'pool':
        return void (await poolLimitSet(pool, { name: 'db', limit: l.limit }));
      case 'add': {
        const template = like.find((r) => r.group === l.group);
        for (let i = 1; i <= l.count; i++) {
          await insertRunner(pool, { id: `what-if-${i}`, name: `new-${i}`, group: l.group, labels: l.label ? ['x'] : [], maxLoad: l.maxLoad });
          await pool.query(`UPDATE runners SET max_parallel_steps = $2 WHERE id = $1`, [`what-if-${i}`, template?.maxParallel ?? 1]);
          // A group drained before its new runner registers drains it too.
        }
        return;
      }
    }
  }

  /** One real dispatch tick with a call parked for every online, undrained runner with a free slot (its free slots). */
  async function realTick(): Promise<Array<[number, string]>> {
    deps = testDispatchDeps(pool, { replicaId: 'replica-what-if', acceptExceeding: true });
    const { rows } = await pool.query(
      `SELECT r.*, r.max_parallel_steps - (SELECT count(*) FROM step_leases l WHERE l.runner_id = r.id)::int AS free
         FROM runners r LEFT JOIN runner_groups g ON g.name = r.group_name
        WHERE r.deleted_at IS NULL AND r.state = 'online' AND NOT r.drained AND NOT coalesce(g.drained, false)`,
    );
    const calls = rows
      .filter((r) => r.free > 0)
      .map((r) => ({ id: r.id as string, call: deps.registry.park({ runner: mapRunner(r), requestId: `${r.id}-call`, slots: r.free, onlyRunId: null, parkedAt: Date.now() }, 30_000) }));
    await deps.tick();
    deps.registry.drainAll();
    const started: Array<[number, string]> = [];
    for (const c of calls) for (const o of await c.call.offers) started.push([Number(o.step_id), c.id]);
    return started.sort((x, y) => x[0] - y[0]);
  }

  it('the entries it says would start, and where, are those one real tick starts after the lever is pulled for real', async () => {
    let started = 0;
    await fc.assert(
      fc.asyncProperty(state, async ({ s, lever: l }) => {
        await seed(s);
        const view = await fleetWhatIf(ctx, input(l));
        const named = view.starts.map((x) => [x.stepId, x.runnerId] as [number, string]).sort((x, y) => x[0] - y[0]);
        await pull(l, s.runners);
        const real = await realTick();
        expect(real).toEqual(named);
        if (named.length) started += 1;
      }),
      { numRuns: 60, seed: 30, endOnFailure: true },
    );
    // Not vacuous: a good share of the states start something.
    expect(started).toBeGreaterThan(10);
  }, 120_000);

  it('writes nothing: every table, the audit log included, is unchanged after what-ifs through the CLI', async () => {
    await seed({
      runners: [
        { group: 'a', label: true, maxLoad: 2, maxParallel: 1, drained: false, offline: false, busyLoad: 2 },
        { group: 'b', label: false, maxLoad: 4, maxParallel: 2, drained: true, offline: false, busyLoad: 0 },
      ],
      runs: [
        { group: 'a', label: false, scope: 'run', steps: [{ load: 1, pool: true }, { load: 1, pool: false }] },
        { group: null, label: false, scope: 'step', steps: [{ load: 2, pool: false }] },
      ],
      poolLimit: 1,
    });
    await pool.query(`INSERT INTO run_pins (run_id, runner_id) SELECT min(id), 'rnr_0' FROM runs`);
    const tables = (await pool.query(`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1`)).rows.map((r) => r.tablename as string);
    const dump = async () => {
      const out: Record<string, string> = {};
      for (const t of tables) out[t] = (await pool.query(`SELECT coalesce(md5(string_agg(x::text, '|' ORDER BY x::text)), '') AS h, count(*) AS n FROM "${t}" x`)).rows.map((r) => `${r.n}:${r.h}`)[0];
      return out;
    };
    const before = await dump();
    expect(before.audit_log).toBeDefined();
    const url = ['--database-url', db.current.url, '--json'];
    const runs = [
      ['fleet', 'what-if', '--drain', 'r0', '--undrain-group', 'b', '--pool', 'db=5', ...url],
      ['fleet', 'what-if', '--remove-runner', 'r0', '--add-runners', '3', '--group', 'a', '--label', 'x', '--max-load', '8', ...url],
      ['fleet', 'what-if', '--weight', 'default=4', '--drain-group', 'a', ...url],
    ];
    for (const args of runs) {
      const r = await runInProcess(args);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    }
    expect(await dump()).toEqual(before);
  });

  it('names the running steps a drain strands and the pinned runs it stalls', async () => {
    await insertRunner(pool, { id: 'rnr_gpu', name: 'gpu', group: 'a', labels: ['gpu'], maxLoad: 4 });
    await insertRunner(pool, { id: 'rnr_cpu', name: 'cpu', group: 'a', maxLoad: 4 });
    const pinned = await seedRun(pool, { scope: 'run', maxParallelSteps: 1, steps: [{ name: 'one' }, { name: 'two' }] });
    await pool.query(`INSERT INTO run_pins (run_id, runner_id) VALUES ($1, 'rnr_cpu')`, [pinned.runId]);
    await insertLease(pool, { stepId: 800_001, runId: 800_001, runnerId: 'rnr_gpu', load: 1 });
    await pool.query(`UPDATE step_leases SET requirement = '{"labels":["gpu"]}', executing = true WHERE step_id = 800001`);
    await insertLease(pool, { stepId: 800_002, runId: 800_002, runnerId: 'rnr_cpu', load: 1 });

    const gpu = await fleetWhatIf(ctx, { drain: 'gpu' });
    expect(gpu.orphaned).toEqual([{ stepId: 800_001, runId: 800_001, runnerId: 'rnr_gpu', executing: true, runner: 'gpu' }]);
    expect(gpu.stalled).toEqual([]);

    // The cpu runner's own lease has a placement the gpu runner matches too: not stranded. Its pinned run stalls.
    const cpu = await fleetWhatIf(ctx, { removeRunner: 'rnr_cpu' });
    expect(cpu.orphaned).toEqual([]);
    expect(cpu.stalled).toEqual([{ runId: pinned.runId, runnerId: 'rnr_cpu', runner: 'cpu', queued: 2 }]);
    expect(cpu.stays.shown.map((x) => [x.stepId, x.verdict.code])).toEqual(pinned.stepIds.map((id) => [id, 'pinned_runner_gone']));

    // Adding a gpu runner to the group gives the stranded step somewhere to go.
    expect((await fleetWhatIf(ctx, { drain: 'gpu', addRunners: 1, group: 'a', label: 'gpu' })).orphaned).toEqual([]);
  });

  it('bad input exits 2 or 3 naming what was wrong', async () => {
    await insertRunner(pool, { id: 'rnr_1', name: 'one', group: 'a' });
    const cli = (...args: string[]) => runInProcess(['fleet', 'what-if', ...args, '--json', '--database-url', db.current.url]);
    const cases: Array<[string[], number, string]> = [
      [['--drain', 'ghost'], 3, 'ghost'],
      [['--undrain-group', 'nogroup'], 3, 'nogroup'],
      [['--pool', 'nopool=2'], 3, 'nopool'],
      [['--weight', 'noproject=2'], 3, 'noproject'],
      [['--pool', 'db'], 2, 'db'],
      [['--add-runners', '2', '--group', 'a', '--label', 'k=v=w'], 2, 'k=v=w'],
      [['--add-runners', '2', '--group', 'zz'], 3, 'zz'],
      [['--add-runners', '2'], 2, '--group'],
      [['--max-load', 'lots', '--add-runners', '1', '--group', 'a'], 2, 'lots'],
    ];
    for (const [args, code, named] of cases) {
      const r = await cli(...args);
      expect({ args, code: r.code }).toEqual({ args, code });
      expect(JSON.parse(r.stdout).error.message).toContain(named);
    }
  });
});
