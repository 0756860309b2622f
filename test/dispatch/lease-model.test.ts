import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reclaimDeadPeers } from '../../src/coordination/coordinator.js';
import { acquire } from '../../src/dispatch/acquire.js';
import { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { ackLeases, completeLeases, expireOnce, releaseLeases, renewLeases, type ItemResult } from '../../src/dispatch/lifecycle.js';
import { createLogger } from '../../src/logger.js';
import { runCancel } from '../../src/orchestrator/cancel.js';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import { runRetry } from '../../src/orchestrator/retry.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { createPool, withTransaction, type Pool } from '../../src/store/pool.js';
import { postureSet } from '../../src/store/posture.js';
import { replicaRegister } from '../../src/store/replicas.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { apply, cloneModel, emptyModel, matches, snapshotOf, type Model, type Op, type Result, type Snapshot } from './lease-model.js';

/**
 * Model-based test of the lease lifecycle over the real store. fast-check generates command
 * sequences (submit, deliver, ack, renew, complete, release, expiry sweep after the lease's
 * deadline or expiry is moved into the past, reclaim of a replica declared dead, retry, cancel,
 * halt) and races of two operations across two replicas, released in an order its scheduler
 * picks. After every command the store equals the model; a race must leave the store as one of
 * the two serial orders would, with each call answered as in that order: one winner, and the
 * loser fenced or a no-op. Stale and forged tokens are fenced and change nothing.
 */

const REPLICAS = ['replica-a', 'replica-b'] as const;
const RUNNERS = ['rnr_model_0', 'rnr_model_1'] as const;
const SEED = Number(process.env.OPSCHAIN_MODEL_SEED ?? 20261201);
const NUM_RUNS = Number(process.env.OPSCHAIN_MODEL_RUNS ?? 40);

type Pick = 'live' | 'any' | 'forged';
interface Abstract {
  kind: 'ack' | 'renew' | 'complete' | 'release' | 'sweep' | 'reclaim' | 'cancel' | 'retry' | 'deliver';
  replica: 0 | 1;
  runner: 0 | 1;
  pick: Pick;
  otherRunner: boolean;
  ix: number;
  exitCode: 0 | 1;
}

interface Real {
  pools: Pool[];
  deps: Dispatcher[];
  runners: RunnerRow[];
  model: Model;
  s: fc.Scheduler;
}

const stats = { commands: 0, races: 0, contended: 0, fenced: 0, delivered: 0, swept: 0, reclaimed: 0 };

/** Resolves a generated operation against the model: which token, which lease, which run. */
function resolve(a: Abstract, m: Model): Op | undefined {
  const replica = REPLICAS[a.replica];
  switch (a.kind) {
    case 'ack':
    case 'renew':
    case 'complete':
    case 'release': {
      const leases = Object.values(m.leases);
      let ref: { stepId: number; token: string; runnerId: string } | undefined;
      if (a.pick === 'live' && leases.length > 0) ref = leases[a.ix % leases.length];
      else if (a.pick === 'forged' && leases.length > 0) {
        const l = leases[a.ix % leases.length];
        ref = { stepId: l.stepId, token: String(Number(l.token) + 1_000_000), runnerId: l.runnerId };
      } else if (m.issued.length > 0) ref = m.issued[a.ix % m.issued.length];
      if (!ref) return undefined;
      const runnerId = a.otherRunner ? RUNNERS.find((r) => r !== ref.runnerId)! : ref.runnerId;
      const base = { replica, runnerId, stepId: ref.stepId, token: ref.token };
      return a.kind === 'complete' ? { kind: 'complete', ...base, exitCode: a.exitCode } : { kind: a.kind, ...base };
    }
    case 'sweep':
      return { kind: 'sweep', replica };
    case 'reclaim':
      return { kind: 'reclaim', dead: replica, by: REPLICAS[1 - a.replica] };
    case 'cancel':
    case 'retry': {
      const runs = Object.keys(m.runs).map(Number);
      return runs.length ? { kind: a.kind, runId: runs[a.ix % runs.length] } : undefined;
    }
    case 'deliver':
      return { kind: 'deliver', replica, runnerId: RUNNERS[a.runner] };
  }
}

const verdict = (r: ItemResult[]): Result => ({ kind: 'item', verdict: r[0]?.ok ? 'ok' : 'fenced' });

async function runOp(real: Real, op: Op): Promise<Result> {
  const deps = (replica: string) => real.deps[REPLICAS.indexOf(replica as (typeof REPLICAS)[number])];
  const pool = real.pools[0];
  switch (op.kind) {
    case 'ack':
      return verdict(await ackLeases(deps(op.replica), op.runnerId, [{ stepId: op.stepId, token: op.token }]));
    case 'renew':
      return verdict(await renewLeases(deps(op.replica), op.runnerId, [{ stepId: op.stepId, token: op.token }]));
    case 'complete':
      return verdict(await completeLeases(deps(op.replica), op.runnerId, [{ stepId: op.stepId, token: op.token, exitCode: op.exitCode, cause: null }]));
    case 'release':
      return verdict(await releaseLeases(deps(op.replica), op.runnerId, [{ stepId: op.stepId, token: op.token }]));
    case 'sweep': {
      const r = await expireOnce(deps(op.replica));
      return { kind: 'sweep', requeued: r.requeued, lost: r.lost, halted: r.halted };
    }
    case 'reclaim': {
      // Judged an hour on, the other replica's heartbeat is past the staleness window (the
      // reclaiming one never takes back its own claims); nothing is rewritten.
      const { rows } = await pool.query(`SELECT now() + interval '1 hour' AS t`);
      const got = await reclaimDeadPeers(
        { pool: deps(op.by).pool, replicaId: op.by, timing: { tickMs: 5_000, stalenessMs: 15_000, shardTtlMs: 15_000, leaderTtlMs: 15_000 }, hooks: orchestratorHooks },
        { now: rows[0].t },
      );
      return { kind: 'reclaim', stepIds: got.map((g) => g.stepId).sort((a, b) => a - b) };
    }
    case 'cancel': {
      const r = await runCancel(pool, op.runId, { actor: 'model' });
      return { kind: 'cancel', cancelled: r.cancelled, revoked: r.revoked };
    }
    case 'retry': {
      const r = await runRetry(pool, op.runId, { actor: 'model' });
      return { kind: 'retry', entered: r.retried.length };
    }
    case 'deliver': {
      const d = deps(op.replica);
      const runner = real.runners.find((r) => r.id === op.runnerId)!;
      const before = d.registry.size;
      const offers = acquire(d, { runner, requestId: randomUUID(), maxOffers: 1, waitMs: 60_000, onlyRunId: null });
      await waitFor(() => d.registry.size > before, { what: 'the acquire parked', intervalMs: 1 });
      try {
        await d.tick();
      } finally {
        d.registry.drainAll();
      }
      return { kind: 'deliver', offers: (await offers).map((o) => ({ stepId: o.step_id, attempt: o.attempt, token: o.token })) };
    }
  }
}

async function storeSnapshot(pool: Pool): Promise<Snapshot> {
  const q = async (sql: string) => (await pool.query(sql)).rows;
  return {
    queue: (await q(`SELECT step_id, attempt FROM queue_ready ORDER BY step_id`)).map((r) => [Number(r.step_id), r.attempt]),
    leases: (await q(`SELECT step_id, attempt, token, holder, runner_id, acked_at IS NOT NULL AS acked, executing FROM step_leases ORDER BY step_id`)).map((r) => [
      Number(r.step_id), r.attempt, String(r.token), r.holder, r.runner_id, r.acked, r.executing,
    ]),
    steps: (await q(`SELECT id, status, attempt FROM steps ORDER BY id`)).map((r) => [Number(r.id), r.status, r.attempt]),
    runs: (await q(`SELECT id, status FROM runs ORDER BY id`)).map((r) => [Number(r.id), r.status]),
    done: (await q(`SELECT step_id, attempt, token FROM completed_attempts ORDER BY step_id, attempt`)).map((r) => [Number(r.step_id), r.attempt, r.token === null ? null : String(r.token)]),
  };
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

async function agree(real: Real, context: string): Promise<void> {
  const store = await storeSnapshot(real.pools[0]);
  expect(store, context).toEqual(snapshotOf(real.model));
}

/** One operation alone. */
class Single implements fc.AsyncCommand<{ m: true }, Real> {
  constructor(readonly a: Abstract) {}
  check = () => true;
  async run(_: { m: true }, real: Real): Promise<void> {
    const op = resolve(this.a, real.model);
    if (!op) return;
    stats.commands++;
    const actual = await runOp(real, op);
    const next = cloneModel(real.model);
    const expected = apply(next, op, actual);
    if ('problem' in expected) throw new Error(`${JSON.stringify(op)}: ${expected.problem}`);
    expect(matches(expected, actual), `${JSON.stringify(op)} answered ${JSON.stringify(actual)}, the model says ${JSON.stringify(expected)}`).toBe(true);
    if (actual.kind === 'item' && actual.verdict === 'fenced') stats.fenced++;
    if (actual.kind === 'deliver') stats.delivered += actual.offers.length;
    if (actual.kind === 'sweep') stats.swept += actual.requeued + actual.lost;
    if (actual.kind === 'reclaim') stats.reclaimed += actual.stepIds.length;
    real.model = next;
    await agree(real, `after ${JSON.stringify(op)}`);
  }
  toString = () => `${this.a.kind}(${JSON.stringify(this.a)})`;
}

/** Two operations released by the scheduler in its order, both in flight at once. */
class Race implements fc.AsyncCommand<{ m: true }, Real> {
  constructor(readonly a: Abstract, readonly b: Abstract) {}
  check = () => true;
  async run(_: { m: true }, real: Real): Promise<void> {
    const ops = [resolve(this.a, real.model), resolve(this.b, real.model)];
    if (!ops[0] || !ops[1]) return;
    // One acquire per replica at a time; a replica is never both dead and reclaiming.
    const [x, y] = ops as [Op, Op];
    if (x.kind === 'deliver' && y.kind === 'deliver' && (x.replica === y.replica || x.runnerId === y.runnerId)) return;
    if (x.kind === 'reclaim' && y.kind === 'reclaim') return;
    stats.commands++;
    stats.races++;
    const started = ops.map((op, i) => real.s.schedule(Promise.resolve(i), `${op!.kind}#${i}`).then(() => runOp(real, op!)));
    const results = await real.s.waitFor(Promise.all(started));
    const store = await storeSnapshot(real.pools[0]);
    const tried: string[] = [];
    for (const order of [[0, 1], [1, 0]]) {
      const m = cloneModel(real.model);
      const answers: string[] = [];
      let fits = true;
      for (const i of order) {
        const e = apply(m, ops[i]!, results[i]);
        if ('problem' in e) {
          answers.push(e.problem);
          fits = false;
        } else if (!matches(e, results[i])) {
          answers.push(`${ops[i]!.kind} expected ${JSON.stringify(e)}`);
          fits = false;
        }
      }
      if (fits && same(store, snapshotOf(m))) {
        if (contended(real.model, x, y)) stats.contended++;
        for (const r of results) if (r.kind === 'item' && r.verdict === 'fenced') stats.fenced++;
        real.model = m;
        return;
      }
      tried.push(`order ${order.join('→')}: ${answers.join('; ') || 'answers fit'}; model ${JSON.stringify(snapshotOf(m))}`);
    }
    throw new Error(`race ${JSON.stringify(ops)} answered ${JSON.stringify(results)}; store ${JSON.stringify(store)} fits no serial order:\n${tried.join('\n')}`);
  }
  toString = () => `race(${JSON.stringify(this.a)}, ${JSON.stringify(this.b)})`;
}

/** Both operations would end the same live lease if each ran alone. */
function contended(m: Model, x: Op, y: Op): boolean {
  const ends = (op: Op) => {
    const c = cloneModel(m);
    const before = new Set(Object.keys(c.leases));
    const e = apply(c, op, op.kind === 'deliver' ? { kind: 'deliver', offers: [] } : undefined);
    if ('problem' in e) return new Set<string>();
    return new Set([...before].filter((k) => !(k in c.leases)));
  };
  const a = ends(x);
  return [...ends(y)].some((k) => a.has(k));
}

class Submit implements fc.AsyncCommand<{ m: true }, Real> {
  constructor(readonly steps: number) {}
  check = () => true;
  async run(_: { m: true }, real: Real): Promise<void> {
    if (Object.keys(real.model.runs).length >= 6) return;
    stats.commands++;
    const def = { name: 'model', steps: Object.fromEntries(Array.from({ length: this.steps }, (_, i) => [`s${i}`, { run: 'true' }])) };
    const { runId } = await runSubmit(real.pools[0], runFileLoad(JSON.stringify(def)), { actor: 'model' });
    const { rows } = await real.pools[0].query(`SELECT id FROM steps WHERE run_id = $1 ORDER BY id`, [runId]);
    const ids = rows.map((r) => Number(r.id));
    real.model.runs[runId] = { id: runId, status: 'running', steps: ids };
    for (const id of ids) {
      real.model.steps[id] = { id, runId, status: 'ready', attempt: 1 };
      real.model.queue[id] = 1;
    }
    await agree(real, `after submitting run ${runId}`);
  }
  toString = () => `submit(${this.steps})`;
}

/** Moves a lease's ack deadline or expiry into the past: the store's clock passes it without a sleep. */
class Age implements fc.AsyncCommand<{ m: true }, Real> {
  constructor(readonly what: 'ack' | 'ttl', readonly ix: number) {}
  check = () => true;
  async run(_: { m: true }, real: Real): Promise<void> {
    const leases = Object.values(real.model.leases);
    if (leases.length === 0) return;
    stats.commands++;
    const l = leases[this.ix % leases.length];
    const column = this.what === 'ack' ? 'ack_deadline' : 'expires_at';
    await real.pools[0].query(`UPDATE step_leases SET ${column} = now() - interval '1 second' WHERE step_id = $1`, [l.stepId]);
    if (this.what === 'ack') real.model.leases[l.stepId].ackOverdue = true;
    else real.model.leases[l.stepId].expired = true;
  }
  toString = () => `age(${this.what}, ${this.ix})`;
}

/** A platform halt around one operation: no offers, the expiry sweep held; everything else goes on. */
class Halted implements fc.AsyncCommand<{ m: true }, Real> {
  constructor(readonly a: Abstract) {}
  check = () => true;
  async run(m: { m: true }, real: Real): Promise<void> {
    stats.commands++;
    const set = (value: boolean) => withTransaction(real.pools[0], (c) => postureSet(c, { field: 'halted', value, reason: 'model', actor: 'model' }));
    await set(true);
    real.model.halted = true;
    try {
      await new Single(this.a).run(m, real);
    } finally {
      await set(false);
      real.model.halted = false;
    }
  }
  toString = () => `halted(${JSON.stringify(this.a)})`;
}

const abstractArb: fc.Arbitrary<Abstract> = fc.record({
  kind: fc.constantFrom('deliver', 'deliver', 'deliver', 'deliver', 'ack', 'ack', 'renew', 'complete', 'complete', 'release', 'sweep', 'sweep', 'reclaim', 'cancel', 'retry'),
  replica: fc.constantFrom(0 as const, 1 as const),
  runner: fc.constantFrom(0 as const, 1 as const),
  pick: fc.constantFrom<Pick>('live', 'live', 'live', 'any', 'forged'),
  otherRunner: fc.constantFrom(false, false, false, true),
  ix: fc.nat(20),
  exitCode: fc.constantFrom(0 as const, 0 as const, 1 as const),
});

/** Operations that end a lease when they win. */
const endingArb = fc.constantFrom<Abstract['kind']>('complete', 'complete', 'release', 'cancel', 'reclaim', 'sweep');

const commandsArb = fc.commands(
  [
    fc.integer({ min: 1, max: 2 }).map((n) => new Submit(n)),
    fc.integer({ min: 1, max: 2 }).map((n) => new Submit(n)),
    abstractArb.map((a) => new Single(a)),
    abstractArb.map((a) => new Single(a)),
    fc.tuple(abstractArb, abstractArb).map(([a, b]) => new Race(a, b)),
    // Two calls over the same live lease.
    fc.tuple(abstractArb, abstractArb, endingArb, endingArb).map(([a, b, ka, kb]) => new Race({ ...a, kind: ka, pick: 'live' }, { ...b, kind: kb, pick: 'live', ix: a.ix })),
    fc.tuple(fc.constantFrom<'ack' | 'ttl'>('ack', 'ttl'), fc.nat(20)).map(([w, i]) => new Age(w, i)),
    fc.tuple(fc.constantFrom<'ack' | 'ttl'>('ack', 'ttl'), fc.nat(20)).map(([w, i]) => new Age(w, i)),
    abstractArb.map((a) => new Halted(a)),
  ],
  { maxCommands: 60, size: 'max' },
);

describe('the lease lifecycle agrees with its model under races across two replicas', () => {
  const db = useTestDatabase();
  const pools: Pool[] = [];

  beforeAll(async () => {
    pools.push(createPool(db.current.url, { max: 6 }), createPool(db.current.url, { max: 6 }));
    for (const id of REPLICAS) await replicaRegister(pools[0], { id, host: 'model', version: 'test' });
    for (const id of RUNNERS) {
      await pools[0].query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, 100, 100, $2)`, [id, `hash-${id}`]);
    }
  });
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.end()));
  });

  it('after every command, the store is the model; every race fits a serial order', async () => {
    const log = createLogger('silent', { pretty: false });
    const { rows } = await pools[0].query(`SELECT * FROM runners WHERE id = ANY($1::text[]) ORDER BY id`, [RUNNERS]);
    const runners = rows.map(mapRunner);
    const allShards = Array.from({ length: 64 }, (_, i) => i);
    const started = Date.now();
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), commandsArb, async (s, cmds) => {
        await pools[0].query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, audit_log`);
        await pools[0].query(`UPDATE fleet_posture SET halted = false, quiesced = false`);
        const deps = REPLICAS.map(
          (id, i) =>
            new Dispatcher({
              pool: pools[i],
              log,
              replicaId: id,
              hooks: orchestratorHooks,
              ownedShards: () => allShards,
              ttlMs: 180_000,
              acceptExceeding: true,
              events: new EventEmitter(),
            }),
        );
        const real: Real = { pools, deps, runners, model: emptyModel(), s };
        await fc.asyncModelRun(() => ({ model: { m: true as const }, real }), cmds);
      }),
      { seed: SEED, numRuns: NUM_RUNS, endOnFailure: true },
    );
    console.log(`lease model: ${NUM_RUNS} sequences, seed ${SEED}, ${stats.commands} commands, ${stats.races} races (${stats.contended} over one lease), ${stats.delivered} deliveries, ${stats.fenced} fenced calls, ${stats.swept} swept, ${stats.reclaimed} reclaimed, ${Date.now() - started} ms`);
    // The generator must reach the interesting cases, or the property proves little.
    expect(stats.contended).toBeGreaterThan(0);
    expect(stats.fenced).toBeGreaterThan(0);
    expect(stats.swept).toBeGreaterThan(0);
    expect(stats.reclaimed).toBeGreaterThan(0);
  }, 120_000);
});
