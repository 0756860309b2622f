import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { acquireCarrying, type AcquireAnswer } from '../../src/dispatch/acquire.js';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { Offer } from '../../src/dispatch/offers.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { createPool, withTransaction, type Pool } from '../../src/store/pool.js';
import { postureSet } from '../../src/store/posture.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { countClaims } from '../support/claim-count.js';
import { testDispatchDeps } from '../support/lifecycle.js';

const chainOf = (n: number, opts: { priority?: number; last?: string } = {}) =>
  runFileLoad(
    [
      `name: chain`,
      ...(opts.priority === undefined ? [] : [`priority: ${opts.priority}`]),
      `steps:`,
      ...Array.from({ length: n }, (_, i) => (i === 0 ? `  s0: { run: "true" }` : `  s${i}: { run: "true", needs: [s${i - 1}]${i === n - 1 ? (opts.last ?? '') : ''} }`)),
    ].join('\n'),
  );

const single = (priority: number) => runFileLoad(`name: other\npriority: ${priority}\nsteps:\n  x: { run: "true" }\n`);

/**
 * Complete-and-acquire with the hand-off: the acquire call that carries a completion is itself a
 * candidate for the step the completion frees. No dispatch loop runs here (kicks wake nothing),
 * so an offer in the answer can only have come from the completion's own transaction.
 */
describe('a step freed by completions carried on an acquire, handed to that very call', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let deps: Dispatcher;
  let seen: { claims: number; parkedReads: number };
  let clock: number;
  let solo: RunnerRow;
  let wide: RunnerRow;
  let gpu: RunnerRow;

  const runner = async (id: string) => mapRunner((await db.current.pool.query(`SELECT * FROM runners WHERE id = $1`, [id])).rows[0]);

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    seen = countClaims(pool);
    // rnr_solo has room for one step at a time: the next one fits only once the last has ended.
    await db.current.pool.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash) VALUES ('rnr_solo', 'solo', 1, 1, 'h1'), ('rnr_wide', 'wide', 2, 2, 'h2')`);
    await db.current.pool.query(`INSERT INTO runners (id, name, max_load, max_parallel_steps, credential_hash, labels) VALUES ('rnr_gpu', 'gpu', 4, 4, 'h3', '{gpu}')`);
    [solo, wide, gpu] = await Promise.all(['rnr_solo', 'rnr_wide', 'rnr_gpu'].map(runner));
  });
  afterAll(async () => pool.end());
  beforeEach(async () => {
    clock = 1_000;
    deps = testDispatchDeps(pool, { replicaId: 'replica-carrying', now: () => clock });
    await db.current.pool.query(`DELETE FROM queue_ready`);
    await db.current.pool.query(`DELETE FROM step_leases`);
    await db.current.pool.query(`UPDATE runners SET drained = false`);
    for (const field of ['quiesced', 'halted'] as const) await withTransaction(db.current.pool, (c) => postureSet(c, { field, value: false, reason: null, actor: 'test' }));
  });

  const park = (r: RunnerRow, slots = 1) => deps.registry.park({ runner: r, requestId: `${r.id}-${Math.random()}`, slots, onlyRunId: null, parkedAt: Date.now() }, 30_000);

  /** The first step of a new run, delivered to `r` by a pass that took everything due. */
  async function firstStep(r: RunnerRow, file = chainOf(2)): Promise<{ runId: number; offer: Offer }> {
    const { runId } = await runSubmit(db.current.pool, file, { actor: 'test' });
    // What the submit's notification does in a server.
    deps.queueChanged();
    const call = park(r, 4);
    expect(await deps.pass()).toMatchObject({ delivered: 1, tookAll: true });
    const [offer] = await call.offers;
    return { runId, offer };
  }

  /** The runner's next acquire, carrying the completion of `done` (exit 0). A short window: an acquire no one answers ends empty. */
  const carry = (r: RunnerRow, done: Offer, waitMs = 30_000): Promise<AcquireAnswer> =>
    acquireCarrying(deps, {
      runner: r,
      requestId: `${r.id}-${Math.random()}`,
      maxOffers: 1,
      waitMs,
      onlyRunId: null,
      fresh: true,
      completions: [{ stepId: done.step_id, token: String(done.token), exitCode: 0, cause: null }],
    });

  async function stepState(runId: number, name: string) {
    const { rows } = await db.current.pool.query(
      `SELECT s.status, s.runner_id, (SELECT count(*)::int FROM queue_ready q WHERE q.step_id = s.id) AS queued
         FROM steps s WHERE s.run_id = $1 AND s.name = $2`,
      [runId, name],
    );
    return rows[0];
  }

  /**
   * The call waits for a tick (no loop runs here): the test runs passes, as the loop would on the
   * freed step's notification, until it is answered; at least one of them claims.
   */
  async function answeredByTick(answer: Promise<AcquireAnswer>): Promise<AcquireAnswer> {
    let settled = false;
    void answer.then(
      () => (settled = true),
      () => (settled = true),
    );
    const claims = seen.claims;
    deps.queueChanged();
    while (!settled) {
      await deps.pass();
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(seen.claims).toBeGreaterThan(claims);
    return answer;
  }

  for (const sighting of ['holds', 'has lapsed'] as const) {
    it(`a chain run by one runner gets each dependent in the answer to its complete-and-acquire, no tick between (sighting of an empty queue ${sighting})`, async () => {
      const steps = 6;
      const { runId, offer } = await firstStep(solo, chainOf(steps));
      // Lapsed: the hand-off reads what is queued ahead in its own transaction instead.
      if (sighting === 'has lapsed') clock += 10_000;
      const claims = seen.claims;
      let ticks = 0;
      deps.events.on('dispatch:tick', () => ticks++);
      let last = offer;
      for (let i = 1; i < steps; i++) {
        const answer = await carry(solo, last, 5_000);
        expect(answer.results).toEqual([{ step_id: last.step_id, ok: true }]);
        expect(answer.offers.map((o) => [o.run_id, o.step])).toEqual([[runId, `s${i}`]]);
        last = answer.offers[0];
      }
      expect(seen.claims).toBe(claims);
      expect(ticks).toBe(0);
      expect(await stepState(runId, `s${steps - 1}`)).toEqual({ status: 'running', runner_id: 'rnr_solo', queued: 0 });
      const done = await carry(solo, last, 0);
      expect(done).toEqual({ offers: [], results: [{ step_id: last.step_id, ok: true }] });
      expect((await db.current.pool.query(`SELECT status FROM runs WHERE id = $1`, [runId])).rows[0].status).toBe('succeeded');
    });
  }

  it('a step the carrying runner cannot place (labels) is not handed to it: it stays queued for a tick', async () => {
    const { runId, offer } = await firstStep(solo, chainOf(2, { last: ', placement: { labels: [gpu] }' }));
    const answer = carry(solo, offer);
    const a = await answeredByTick(answer);
    expect(a).toEqual({ offers: [], results: [{ step_id: offer.step_id, ok: true }] });
    expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
    // A runner that matches gets it from a tick.
    const other = park(gpu);
    expect(await deps.pass()).toMatchObject({ delivered: 1 });
    expect((await other.offers).map((o) => o.step)).toEqual(['s1']);
  });

  it('a runner still full after its completions gets nothing: its own capacity counts what keeps running', async () => {
    // rnr_wide (max_load 2) runs the chain's s0 and another run's step; s1 has load 2.
    const { runId, offer } = await firstStep(wide, chainOf(2, { last: ', load: 2' }));
    await runSubmit(db.current.pool, single(0), { actor: 'test' });
    deps.queueChanged();
    const busy = park(wide);
    expect(await deps.pass()).toMatchObject({ delivered: 1 });
    expect((await busy.offers).map((o) => o.step)).toEqual(['x']);
    const a = await answeredByTick(carry(wide, offer));
    expect(a.offers).toEqual([]);
    expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
  });

  it('a halted fleet gets nothing: the freed step is queued and the call is answered by a tick, empty', async () => {
    const { runId, offer } = await firstStep(solo);
    await withTransaction(db.current.pool, (c) => postureSet(c, { field: 'halted', value: true, reason: 'test', actor: 'test' }));
    const a = await answeredByTick(carry(solo, offer));
    expect(a).toEqual({ offers: [], results: [{ step_id: offer.step_id, ok: true }] });
    expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
  });

  it('a runner drained since its call was authenticated is not handed the step', async () => {
    const { runId, offer } = await firstStep(solo);
    await db.current.pool.query(`UPDATE runners SET drained = true WHERE id = 'rnr_solo'`);
    // The call's runner row says undrained (read before the lever): the transaction's read decides.
    const a = await answeredByTick(carry(solo, offer));
    expect(a.offers).toEqual([]);
    expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
  });

  describe('with no sighting of the queue, nothing due is overtaken', () => {
    it('an entry of the same lane queued earlier goes first: the freed step waits for the tick', async () => {
      const { runId, offer } = await firstStep(solo);
      const { runId: other } = await runSubmit(db.current.pool, single(0), { actor: 'test' });
      deps.queueChanged();
      const a = await answeredByTick(carry(solo, offer));
      expect(a.offers.map((o) => [o.run_id, o.step])).toEqual([[other, 'x']]);
      expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
    });

    it('an entry of a more urgent lane waiting keeps a bulk step from being handed off', async () => {
      const { runId, offer } = await firstStep(solo);
      const { runId: urgent } = await runSubmit(db.current.pool, single(120), { actor: 'test' });
      deps.queueChanged();
      const a = await answeredByTick(carry(solo, offer));
      expect(a.offers.map((o) => [o.run_id, o.step])).toEqual([[urgent, 'x']]);
      expect(await stepState(runId, 's1')).toMatchObject({ status: 'ready', queued: 1 });
    });

    it('an interactive step freed goes ahead of bulk entries waiting, as a tick would order it', async () => {
      const { runId, offer } = await firstStep(solo, chainOf(2, { priority: 60 }));
      const { runId: bulk } = await runSubmit(db.current.pool, single(0), { actor: 'test' });
      deps.queueChanged();
      const claims = seen.claims;
      const a = await carry(solo, offer, 5_000);
      expect(a.offers.map((o) => [o.run_id, o.step])).toEqual([[runId, 's1']]);
      expect(seen.claims).toBe(claims);
      expect(await stepState(bulk, 'x')).toMatchObject({ status: 'ready', queued: 1 });
    });

    it('a read that found entries ahead spares the hand-offs just after it the same read', async () => {
      const first = await firstStep(solo);
      const second = await firstStep(wide);
      const { runId: earlier } = await runSubmit(db.current.pool, single(0), { actor: 'test' });
      deps.queueChanged();
      const completion = async (r: RunnerRow, o: Offer) => {
        const done = new Promise((resolve) => deps.events.once('lease:completed', resolve));
        const answer = carry(r, o);
        await done;
        // Wrapped: the answer comes only after a tick.
        return { answer };
      };
      const reads = seen.parkedReads;
      const { answer: a1 } = await completion(solo, first.offer);
      expect(seen.parkedReads).toBe(reads + 1);
      // Within a busy poll of that read: no read at all.
      const { answer: a2 } = await completion(wide, second.offer);
      expect(seen.parkedReads).toBe(reads + 1);
      // Both carriers wait for a tick, which gives them the entry queued first and one freed step.
      const x = await answeredByTick(a1);
      const y = await a2;
      expect([...x.offers, ...y.offers].map((o) => o.run_id)).toContain(earlier);
      for (const runId of [first.runId, second.runId]) expect(await stepState(runId, 's0')).toMatchObject({ status: 'succeeded' });
    });

    it('entries set aside as unplaceable are not waiting ahead of it', async () => {
      const { runId, offer } = await firstStep(solo);
      const { runId: blocked } = await runSubmit(db.current.pool, runFileLoad(`name: nowhere\nsteps:\n  x: { run: "true", placement: { labels: [nowhere] } }\n`), { actor: 'test' });
      await db.current.pool.query(`UPDATE queue_ready SET blocked_on = 'labels', blocked_at = now() WHERE run_id = $1`, [blocked]);
      deps.queueChanged();
      const a = await carry(solo, offer, 5_000);
      expect(a.offers.map((o) => [o.run_id, o.step])).toEqual([[runId, 's1']]);
    });
  });
});
