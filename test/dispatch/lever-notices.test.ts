import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquire } from '../../src/dispatch/acquire.js';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import type { ParkedAcquire } from '../../src/dispatch/waiters.js';
import { nextEvent } from '../../src/events.js';
import { postureLever } from '../../src/ops/domain/postures.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { listenChannel, type Listener } from '../../src/store/listen.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { QUEUE_CHANNEL } from '../../src/store/queue.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';
import { testDispatchDeps } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';

/** Well under the 2 s an unplaced-work sighting may hold, and under any poll's window. */
const PROMPT_MS = 1_000;
const WINDOW_MS = 30_000;

/**
 * Two dispatchers on one store, each fed by its own LISTEN on the queue channel as a replica's is,
 * and driven tick by tick: no loop runs, so what answers a parked call is the notice alone.
 */
describe('postures and drains announced to parked calls (two dispatchers, tick by tick)', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let a: Dispatcher;
  let b: Dispatcher;
  const kicks = new Map<Dispatcher, number>();
  const listeners: Listener[] = [];
  const runners = new Map<string, RunnerRow>();
  const ends: AbortController[] = [];

  /** A dispatcher whose queue notices come from its own listener, connected before it returns. */
  const replica = async (id: string): Promise<Dispatcher> => {
    const d = testDispatchDeps(pool, { replicaId: id, acceptExceeding: true });
    kicks.set(d, 0);
    d.wakeWith(() => kicks.set(d, kicks.get(d)! + 1));
    let connected!: () => void;
    const up = new Promise<void>((r) => (connected = r));
    listeners.push(
      listenChannel(db.current.url, QUEUE_CHANNEL, (payload) => {
        d.queueNotice(payload);
        if (payload === undefined) connected();
      }, () => {}),
    );
    await up;
    return d;
  };

  const row = async (id: string) => mapRunner((await pool.query(`SELECT * FROM runners WHERE id = $1`, [id])).rows[0]);

  const park = (d: Dispatcher, runnerId: string): { call: ParkedAcquire; offers: Promise<unknown[]>; answeredAt: Promise<number> } => {
    const { acquire: call, offers } = d.registry.park({ runner: runners.get(runnerId)!, requestId: `${runnerId}-${Math.random()}`, slots: 1, onlyRunId: null, parkedAt: Date.now() }, WINDOW_MS);
    return { call, offers, answeredAt: offers.then(() => Date.now()) };
  };

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 6 });
    await insertRunner(pool, { id: 'rnr_a', name: 'a', labels: ['only-a'] });
    await insertRunner(pool, { id: 'rnr_b', name: 'b', group: 'gb' });
    await insertRunner(pool, { id: 'rnr_c', name: 'c' });
    for (const id of ['rnr_a', 'rnr_b', 'rnr_c']) runners.set(id, await row(id));
    a = await replica('replica-a');
    b = await replica('replica-b');
  });
  afterAll(async () => {
    for (const e of ends) e.abort();
    for (const d of [a, b]) d?.registry.drainAll();
    await Promise.all(listeners.map((l) => l.stop()));
    await pool?.end();
  });

  it('a drain of a runner, written by another process, answers its parked calls on every replica at once, as held; other calls stay parked', async () => {
    const onA = park(a, 'rnr_a');
    const onB = park(b, 'rnr_a');
    const others = [park(a, 'rnr_b'), park(a, 'rnr_c')];
    const heard = nextEvent(a.events, 'lever:heard');
    const t0 = Date.now();
    await fleetDrainSet(pool, { runner: 'a', drained: true, actor: 'elsewhere' });
    expect(await onA.offers).toEqual([]);
    expect(await onB.offers).toEqual([]);
    expect((await onA.answeredAt) - t0).toBeLessThan(PROMPT_MS);
    expect((await onB.answeredAt) - t0).toBeLessThan(PROMPT_MS);
    expect([onA.call.held, onB.call.held]).toEqual([true, true]);
    expect(await heard).toEqual({ lever: 'drain', held: 1, owed: 0, lifted: false });
    expect(others.map((o) => o.call.settled)).toEqual([false, false]);

    // A group drained: its runners' calls only.
    const t1 = Date.now();
    await fleetDrainSet(pool, { group: 'gb', drained: true, actor: 'elsewhere' });
    expect(await others[0].offers).toEqual([]);
    expect((await others[0].answeredAt) - t1).toBeLessThan(PROMPT_MS);
    expect(others[1].call.settled).toBe(false);
    await fleetDrainSet(pool, { group: 'gb', drained: false, actor: 'elsewhere' });
    others[1].call.deliver([]);
  });

  it('a halt answers every parked call at once; a posture over one in force answers nothing new; the resume plans again at once and the waiting entry is offered', async () => {
    const before = [park(a, 'rnr_b'), park(a, 'rnr_c'), park(b, 'rnr_c')];
    const t0 = Date.now();
    await postureLever(pool, { fields: ['halted'], value: true, reason: 'incident', actor: 'elsewhere' });
    for (const p of before) {
      expect(await p.offers).toEqual([]);
      expect((await p.answeredAt) - t0).toBeLessThan(PROMPT_MS);
      expect(p.call.held).toBe(true);
    }
    // The runners poll again and park under the halt; work waits; a tick offers nothing.
    const again = park(a, 'rnr_c');
    const run = await seedRun(pool, { steps: [{ name: 'waiting' }] });
    expect(await a.tick()).toMatchObject({ stoppedBy: 'halted', delivered: 0 });
    const quiesced = nextEvent(a.events, 'lever:heard');
    await postureLever(pool, { fields: ['quiesced'], value: true, actor: 'elsewhere' });
    expect(await quiesced).toEqual({ lever: 'posture', held: 0, owed: 0, lifted: false });
    const halfLifted = nextEvent(a.events, 'lever:heard');
    await postureLever(pool, { fields: ['halted'], value: false, actor: 'elsewhere' });
    expect(await halfLifted).toEqual({ lever: 'posture', held: 0, owed: 0, lifted: false });
    expect(again.call.settled).toBe(false);

    const kicked = kicks.get(a)!;
    const lifted = nextEvent(a.events, 'lever:heard');
    await postureLever(pool, { fields: ['quiesced'], value: false, actor: 'elsewhere' });
    expect(await lifted).toEqual({ lever: 'posture', held: 0, owed: 0, lifted: true });
    // The loop is woken at once, and its pass is not skipped on what an earlier tick saw.
    expect(kicks.get(a)!).toBeGreaterThan(kicked);
    expect(await a.pass()).toMatchObject({ delivered: 1 });
    expect(await again.offers).toMatchObject([{ run_id: run.runId, step: 'waiting' }]);
  });

  it('a call a tick holds when the drain is announced is answered once the tick lets go, unless the drain is lifted first', async () => {
    const held = park(a, 'rnr_c');
    const reserved = a.registry.snapshot();
    const heard = nextEvent(a.events, 'lever:heard');
    await fleetDrainSet(pool, { runner: 'c', drained: true, actor: 'elsewhere' });
    expect(await heard).toEqual({ lever: 'drain', held: 0, owed: 1, lifted: false });
    expect(held.call.settled).toBe(false);
    a.registry.unreserve(reserved);
    a.levers.settle();
    expect(await held.offers).toEqual([]);
    expect(held.call.held).toBe(true);

    const lifted = nextEvent(a.events, 'lever:heard');
    await fleetDrainSet(pool, { runner: 'c', drained: false, actor: 'elsewhere' });
    expect(await lifted).toMatchObject({ lifted: true });
    const kept = park(a, 'rnr_c');
    const reservedAgain = a.registry.snapshot();
    const drained = nextEvent(a.events, 'lever:heard');
    await fleetDrainSet(pool, { runner: 'c', drained: true, actor: 'elsewhere' });
    expect(await drained).toMatchObject({ owed: 1 });
    const undrained = nextEvent(a.events, 'lever:heard');
    await fleetDrainSet(pool, { runner: 'c', drained: false, actor: 'elsewhere' });
    expect(await undrained).toMatchObject({ lifted: true });
    a.registry.unreserve(reservedAgain);
    a.levers.settle();
    expect(kept.call.settled).toBe(false);
    kept.call.deliver([]);
  });

  it('the poll of a drained runner idles until its drain is lifted anywhere, then parks and is offered the entry waiting for it', async () => {
    // rnr_a is drained (first test): its poll idles, out of the parked calls.
    const drained = await row('rnr_a');
    expect(drained.drained).toBe(true);
    const run = await seedRun(pool, { steps: [{ name: 'for-a', placement: { labels: ['only-a'] } }] });
    const end = new AbortController();
    ends.push(end);
    const parkedBefore = a.registry.size;
    const answer = acquire(a, { runner: drained, requestId: 'idle-a', maxOffers: 1, waitMs: WINDOW_MS, onlyRunId: null, fresh: true, signal: end.signal }).then((offers) => ({ offers, at: Date.now() }));
    expect(await a.tick()).toMatchObject({ delivered: 0 });
    expect(a.registry.size).toBe(parkedBefore);

    const t0 = Date.now();
    await fleetDrainSet(pool, { runner: 'a', drained: false, actor: 'elsewhere' });
    await waitFor(() => a.registry.size > parkedBefore, { timeoutMs: 5_000, intervalMs: 5, what: 'the idling poll to park' });
    expect(await a.pass()).toMatchObject({ delivered: 1 });
    const { offers, at } = await answer;
    expect(offers).toMatchObject([{ run_id: run.runId, step: 'for-a' }]);
    expect(at - t0).toBeLessThan(PROMPT_MS);

    // A poll carrying the runner as read before the lift (a credential cached a moment longer)
    // parks rather than idling out its window.
    const late = acquire(a, { runner: drained, requestId: 'late-a', maxOffers: 1, waitMs: WINDOW_MS, onlyRunId: null, fresh: true, signal: end.signal });
    await waitFor(() => a.registry.size > parkedBefore, { timeoutMs: 5_000, intervalMs: 5, what: 'the late poll to park' });
    end.abort();
    expect(await late).toEqual([]);
  });

  it('notices that may have been missed (the listener connected again) send every idling poll to park, where the ticks judge its drain', async () => {
    await fleetDrainSet(pool, { runner: 'b', drained: true, actor: 'elsewhere' });
    const end = new AbortController();
    ends.push(end);
    const parkedBefore = a.registry.size;
    const idling = acquire(a, { runner: await row('rnr_b'), requestId: 'idle-b', maxOffers: 1, waitMs: WINDOW_MS, onlyRunId: null, fresh: true, signal: end.signal });
    await seedRun(pool, { steps: [{ name: 'any' }] });
    a.queueNotice(undefined);
    await waitFor(() => a.registry.size > parkedBefore, { timeoutMs: 5_000, intervalMs: 5, what: 'the idling poll to park' });
    // Parked, but drained: the tick offers it nothing.
    expect(await a.tick()).toMatchObject({ delivered: 0 });
    end.abort();
    expect(await idling).toEqual([]);
  });
});
