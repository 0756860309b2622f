import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { unblockOnce } from '../../src/dispatch/blocked.js';
import type { Dispatcher } from '../../src/dispatch/dispatcher.js';
import { completeLeases } from '../../src/dispatch/lifecycle.js';
import { UnplaceableSeen } from '../../src/dispatch/unplaceable-seen.js';
import type { ParkedAcquire } from '../../src/dispatch/waiters.js';
import { listenChannel, type Listener } from '../../src/store/listen.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { QUEUE_CHANNEL } from '../../src/store/queue.js';
import { mapRunner, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { deliver, testDispatchDeps } from '../support/lifecycle.js';
import { seedRun } from '../support/seed.js';
import { recordStatements, statementsOf } from '../support/statements.js';

const call = (runner: Partial<RunnerRow>, onlyRunId: number | null = null) => ({ runner: { group: null, labels: [], executors: [], ...runner }, onlyRunId }) as unknown as ParkedAcquire;

describe('UnplaceableSeen', () => {
  it('holds for the queue it was seen for, until a change or its validity, which doubles while nothing changes', () => {
    let now = 0;
    const seen = new UnplaceableSeen(() => now, 250, 1_000);
    const sighting = { stepIds: [1], codes: ['no_waiter_matches' as const], placements: [] };
    expect(seen.msLeft()).toBeNull();
    seen.saw(seen.mark(), 'a', sighting);
    expect([seen.holds('a'), seen.holds('b')]).toEqual([true, false]);
    now += 100;
    expect(seen.msLeft()).toBe(150);
    now += 150;
    expect(seen.holds('a')).toBe(false);
    // Seen again with nothing changed between: valid twice as long, up to the cap.
    for (const valid of [500, 1_000, 1_000]) {
      seen.saw(seen.mark(), 'a', sighting);
      now += valid - 1;
      expect(seen.holds('a')).toBe(true);
      now += 1;
      expect(seen.holds('a')).toBe(false);
    }
    // A change voids it, and the next sighting starts short again.
    seen.saw(seen.mark(), 'a', sighting);
    seen.changed();
    expect(seen.holds('a')).toBe(false);
    seen.saw(seen.mark(), 'a', sighting);
    now += 250;
    expect(seen.holds('a')).toBe(false);
    // What capacity may end is never backed off: the busy cadence.
    const busy = { stepIds: [1], codes: ['busy_by_load' as const], placements: [] };
    seen.saw(seen.mark(), 'a', busy);
    seen.saw(seen.mark(), 'a', busy);
    now += 250;
    expect(seen.holds('a')).toBe(false);
  });

  it('a change while the tick ran voids what it saw', () => {
    const seen = new UnplaceableSeen(() => 0, 250, 2_000);
    const mark = seen.mark();
    seen.changed();
    seen.saw(mark, 'a', { stepIds: [1], codes: ['busy_by_load'], placements: [] });
    expect(seen.holds('a')).toBe(false);
  });

  it('which calls parked since could place something, by why the entries stayed', () => {
    const seen = new UnplaceableSeen(() => 0, 250, 2_000);
    const plain = JSON.stringify([null, [], [], null]);
    // A full pool or a run at its cap: no call.
    seen.saw(seen.mark(), 'a', { stepIds: [1, 2], codes: ['pool_full', 'run_at_cap'], placements: [plain] });
    expect(seen.matters(call({ labels: ['gpu'] }))).toBe(false);
    // No parked runner matched: a call placed unlike every one planned over.
    seen.saw(seen.mark(), 'a', { stepIds: [1], codes: ['no_waiter_matches'], placements: [plain] });
    expect(seen.matters(call({}))).toBe(false);
    expect(seen.matters(call({ labels: ['gpu'] }))).toBe(true);
    expect(seen.matters(call({ group: 'build' }))).toBe(true);
    expect(seen.matters(call({}, 7))).toBe(true);
    // Capacity: any call.
    seen.saw(seen.mark(), 'a', { stepIds: [1], codes: ['busy_by_load'], placements: [plain] });
    expect(seen.matters(call({}))).toBe(true);
  });
});

describe('passes over work no parked call can take', () => {
  const db = useTestDatabase();
  let pool: Pool;
  let other: Pool;
  let rec: { statements: string[]; recording: boolean };
  const runners = new Map<string, RunnerRow>();
  let deps: Dispatcher;
  let now: number;

  beforeAll(async () => {
    pool = createPool(db.current.url, { max: 4 });
    rec = recordStatements(pool);
    other = createPool(db.current.url, { max: 2 });
    const add = async (id: string, labels: string[], maxLoad: number) => {
      await other.query(`INSERT INTO runners (id, name, labels, max_load, max_parallel_steps, credential_hash) VALUES ($1, $1, $2, $3, 8, $4)`, [id, labels, maxLoad, `hash-${id}`]);
      runners.set(id, mapRunner((await other.query(`SELECT * FROM runners WHERE id = $1`, [id])).rows[0]));
    };
    // rnr_gpu is the only runner with the label, and it is busy; the others park.
    await add('rnr_gpu', ['gpu'], 1);
    for (const id of ['rnr_a', 'rnr_b', 'rnr_c']) await add(id, [], 4);
    await add('rnr_arm', ['arm'], 4);
  });
  afterAll(async () => {
    await pool.end();
    await other.end();
  });
  beforeEach(async () => {
    await other.query(`TRUNCATE runs, steps, step_logs, queue_ready, step_leases, completed_attempts, run_pins, pool_holds, pool_limits`);
    now = 0;
    deps = testDispatchDeps(pool, { replicaId: 'replica-unplaced', now: () => now });
  });

  const park = (d: Dispatcher, id: string, slots = 1) => d.registry.park({ runner: runners.get(id)!, requestId: `${id}-${Math.random()}`, slots, onlyRunId: null, parkedAt: Date.now() }, 30_000);
  const sent = async <T>(fn: () => Promise<T>) => statementsOf(rec, fn);
  const claims = (statements: string[]) => statements.filter((s) => /FROM queue_ready/.test(s) && /ORDER BY|LIMIT/.test(s));

  it('parking runners claim nothing while nothing could place the head; a runner placed otherwise is read alone; new work goes out at once', async () => {
    // The gpu runner is busy with one step, so the three queued behind it wait for its capacity:
    // they stay in the claim path (nothing to set aside), and no parked runner can take them.
    const busy = await seedRun(other, { steps: [{ name: 'running', placement: { labels: ['gpu'] } }] });
    await deliver(other, { run: busy.runId, step: 'running', runnerId: 'rnr_gpu' });
    const backlog = await seedRun(other, { steps: ['g1', 'g2', 'g3'].map((name) => ({ name, placement: { labels: ['gpu'] } })) });
    const parked = [park(deps, 'rnr_a'), park(deps, 'rnr_b')];
    expect(await deps.pass()).toMatchObject({ waiters: 2, claimed: 3, delivered: 0, returned: 3, blocked: 0 });
    expect((await other.query(`SELECT count(*)::int AS n FROM queue_ready WHERE blocked_on IS NULL`)).rows[0].n).toBe(3);

    // Runners placed like those already planned over park and re-park, each kicking a pass: not one statement.
    for (let i = 0; i < 5; i++) {
      parked.push(park(deps, ['rnr_a', 'rnr_b', 'rnr_c'][i % 3]));
      const { value, statements } = await sent(() => deps.pass());
      expect(value).toBeNull();
      expect(statements).toEqual([]);
    }

    // A runner placed otherwise: a tick over its call alone, reading its runner only.
    const arm = park(deps, 'rnr_arm');
    const { value: armTick, statements: armStatements } = await sent(() => deps.pass());
    expect(armTick).toMatchObject({ waiters: 1, delivered: 0 });
    const parkedReads = armStatements.filter((s) => /fleet_posture/.test(s) && /FROM runners r/.test(s));
    expect(parkedReads).toHaveLength(1);
    expect(claims(armStatements).length).toBeGreaterThan(0);
    // ... and judged: it parks again for nothing.
    parked.push(arm, park(deps, 'rnr_arm'));
    expect((await sent(() => deps.pass())).statements).toEqual([]);

    // New work is announced (the enqueue's NOTIFY, or its in-process signal): delivered at once.
    const fresh = await seedRun(other, { steps: [{ name: 'plain' }] });
    deps.queueChanged();
    expect(await deps.pass()).toMatchObject({ delivered: 1 });
    expect((await parked[0].offers).map((o) => o.run_id)).toEqual([fresh.runId]);

    // A full tick again after that: the gpu steps are still there, and seen again.
    expect(await deps.pass()).toMatchObject({ claimed: 3, delivered: 0 });
    expect((await sent(() => deps.pass())).statements).toEqual([]);
    // The sighting is valid POLL_BUSY_MS, then claimed again; with nothing changed between, twice as long.
    now += 250;
    expect(await deps.pass()).toMatchObject({ claimed: 3, delivered: 0 });
    now += 250;
    expect(await deps.pass()).toBeNull();
    now += 250;
    expect(await deps.pass()).toMatchObject({ claimed: 3, delivered: 0 });
    expect(backlog.stepIds).toHaveLength(3);
    deps.registry.drainAll();
  });

  it('a pool released on another dispatcher wakes this one through the queue channel, and the entry waiting on it is delivered', async () => {
    const twin = testDispatchDeps(pool, { replicaId: 'replica-twin', now: () => now });
    await other.query(`INSERT INTO pool_limits (name, max_holders) VALUES ('db', 1)`);
    await seedRun(other, { steps: [{ name: 'p1', pools: ['db'] }, { name: 'p2', pools: ['db'] }] });
    // The twin delivers p1, which holds the pool; p2 waits on it (set aside on pool:db).
    const holder = park(twin, 'rnr_a', 2);
    expect(await twin.tick()).toMatchObject({ delivered: 1, returned: 1, blocked: 1 });
    const [lease] = await holder.offers;
    expect(lease.step).toBe('p1');

    // This dispatcher listens on the queue channel, as every replica does.
    const freed: string[] = [];
    let notices = 0;
    const listener: Listener = listenChannel(db.current.url, QUEUE_CHANNEL, (payload) => {
      notices++;
      const key = deps.queueNotice(payload);
      if (key !== null) freed.push(key);
    }, () => {});
    try {
      await until(() => notices > 0);
      const waiting = park(deps, 'rnr_b');
      expect(await deps.pass()).toMatchObject({ claimed: 0, tookAll: true });
      expect(await deps.pass()).toBeNull();

      // The twin's runner completes p1: the release is announced on commit.
      expect(await completeLeases(twin, 'rnr_a', [{ stepId: lease.step_id, token: lease.token, exitCode: 0, cause: null }])).toEqual([{ step_id: lease.step_id, ok: true }]);
      await until(() => freed.length > 0);
      expect(freed).toEqual(['pool:db']);
      // This replica checks what was set aside on that pool at once (its unblock cadence, nudged
      // with the key), which puts p2 back and notifies; the next pass delivers it.
      const heard = notices;
      expect(await unblockOnce(pool, { shards: deps.ownedShards(), acceptExceeding: false, keys: freed })).toEqual({ blocked: 1, returned: 1 });
      await until(() => notices > heard);
      expect(await deps.pass()).toMatchObject({ delivered: 1 });
      expect((await waiting.offers).map((o) => o.step)).toEqual(['p2']);
    } finally {
      await listener.stop();
      twin.registry.drainAll();
    }
  });

  /** Waits for a condition the store's notifications bring about, polling the event loop. */
  async function until(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!cond()) {
      if (Date.now() > deadline) throw new Error('condition not met');
      await new Promise((r) => setImmediate(r));
    }
  }
});
