import { describe, expect, it } from 'vitest';
import { ParkedCalls, PARKED_PER_RUNNER, TOUCH_EVERY_MS } from '../../src/api/parked-calls.js';
import { WaiterRegistry } from '../../src/dispatch/waiters.js';
import { runnersSeen, type RunnerRow } from '../../src/store/runners.js';
import { useTestDatabase } from '../support/db.js';
import { registerRunner } from '../support/lifecycle.js';

describe('the long polls in flight on a replica (ParkedCalls)', () => {
  const db = useTestDatabase();

  /** The runner's liveness as the store holds it. */
  const lastSeen = async (id: string) => {
    const { rows } = await db.current.pool.query(`SELECT last_seen_at, last_replica, state FROM runners WHERE id = $1`, [id]);
    return rows[0] as { last_seen_at: Date | null; last_replica: string | null; state: string };
  };

  it('writes a runner\'s liveness at most once per interval of its clock, and again once the interval has passed', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_live', 'rnr_live');
    await registerRunner(pool, 'rnr_other', 'rnr_other');
    let now = 1_000_000;
    const writes: string[] = [];
    const pending: Array<Promise<unknown>> = [];
    const parked = new ParkedCalls({
      clock: { now: () => now },
      touch: (runnerId) => {
        writes.push(runnerId);
        const w = runnersSeen(pool, { replicaId: 'replica-touch', seen: [{ runnerId, agoMs: 0 }] });
        pending.push(w);
        return w;
      },
    });

    parked.seen('rnr_live');
    parked.seen('rnr_live');
    now += TOUCH_EVERY_MS - 1;
    parked.seen('rnr_live');
    parked.seen('rnr_other');
    await Promise.all(pending);
    expect(writes).toEqual(['rnr_live', 'rnr_other']);
    const first = await lastSeen('rnr_live');
    expect(first).toMatchObject({ last_replica: 'replica-touch', state: 'online' });

    // One interval after its first write, the next call writes again (the store's clock stamps it).
    now += 1;
    parked.seen('rnr_live');
    await Promise.all(pending);
    expect(writes).toEqual(['rnr_live', 'rnr_other', 'rnr_live']);
    expect((await lastSeen('rnr_live')).last_seen_at!.getTime()).toBeGreaterThanOrEqual(first.last_seen_at!.getTime());
  });

  it('a liveness write that failed is tried again on the runner\'s next call, not one interval later', async () => {
    let fail = true;
    const writes: boolean[] = [];
    const parked = new ParkedCalls({
      clock: { now: () => 0 },
      touch: async () => {
        writes.push(fail);
        if (fail) throw new Error('store unavailable');
      },
    });
    parked.seen('rnr_x');
    // The failure is noticed after the write's promise settles.
    await new Promise((resolve) => setImmediate(resolve));
    fail = false;
    parked.seen('rnr_x');
    parked.seen('rnr_x');
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([true, false]);
  });

  it(`admits at most ${PARKED_PER_RUNNER} acquires of one runner; an answered one frees its place; watches are not counted`, () => {
    const parked = new ParkedCalls({ clock: { now: () => 0 }, touch: async () => {} });
    const calls = Array.from({ length: PARKED_PER_RUNNER }, () => parked.acquire('rnr_a'));
    expect(calls.every((c) => c !== undefined)).toBe(true);
    expect(parked.acquire('rnr_a')).toBeUndefined();
    // Another runner has its own places, and watches take none.
    expect(parked.acquire('rnr_b')).toBeDefined();
    parked.watch();
    expect(parked.inFlight('rnr_a')).toBe(PARKED_PER_RUNNER);
    calls[0]!.done();
    // Answering twice frees one place only.
    calls[0]!.done();
    expect(parked.inFlight('rnr_a')).toBe(PARKED_PER_RUNNER - 1);
    expect(parked.acquire('rnr_a')).toBeDefined();
    expect(parked.acquire('rnr_a')).toBeUndefined();
  });

  it('a close answers every call in flight (acquires and watches) and says the server is closing', () => {
    const parked = new ParkedCalls({ clock: { now: () => 0 }, touch: async () => {} });
    const acquire = parked.acquire('rnr_a')!;
    const watch = parked.watch();
    const answered = parked.acquire('rnr_a')!;
    answered.done();
    expect(parked.closing).toBe(false);
    parked.close();
    expect(parked.closing).toBe(true);
    expect([acquire.signal.aborted, watch.signal.aborted, answered.signal.aborted]).toEqual([true, true, false]);
    // Calls that got past the credential check as the close began park after it: answered at
    // once, or the close would wait out their poll window.
    expect([parked.acquire('rnr_b')!.signal.aborted, parked.watch().signal.aborted]).toEqual([true, true]);
  });

  it('an acquire parked with its caller already gone is answered empty at once, not at the end of its window', async () => {
    const registry = new WaiterRegistry();
    const gone = new AbortController();
    gone.abort();
    const { offers } = registry.park({ runner: { id: 'rnr_a' } as RunnerRow, requestId: 'r1', slots: 1, onlyRunId: null, parkedAt: 0 }, 3_600_000, gone.signal);
    expect(await offers).toEqual([]);
    expect(registry.size).toBe(0);
  });
});
