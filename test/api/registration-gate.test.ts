import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RegistrationGate, REGISTRATIONS_IN_FLIGHT, REGISTRATIONS_WAITING } from '../../src/api/registration-gate.js';
import { systemClock, type Clock } from '../../src/clock.js';
import { serverPlan } from '../../src/features.js';
import { createLogger } from '../../src/logger.js';
import { RunnerClient } from '../../src/runner/client.js';
import type { ServerHandle } from '../../src/server.js';
import { createPool, type Pool } from '../../src/store/pool.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';

describe('RegistrationGate', () => {
  it('serves its permits, queues up to its bound, refuses beyond, and hands a released permit to the next in line', async () => {
    const gate = new RegistrationGate(2, 2);
    const a = (await gate.enter())!;
    const b = (await gate.enter())!;
    const third = gate.enter()!;
    const gone = new AbortController();
    const fourth = gate.enter(gone.signal)!;
    expect(gate.enter()).toBeUndefined();
    expect(gate.load).toEqual({ inFlight: 2, waiting: 2 });
    // A caller that goes away leaves the queue.
    gone.abort();
    expect(await fourth).toBeUndefined();
    expect(gate.load).toEqual({ inFlight: 2, waiting: 1 });
    a();
    a();
    const c = (await third)!;
    expect(gate.load).toEqual({ inFlight: 2, waiting: 0 });
    b();
    c();
    expect(gate.load).toEqual({ inFlight: 0, waiting: 0 });
  });
});

describe('registration under a stampede', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let reg: string;
  let holder: Pool;
  beforeAll(async () => {
    const { startTestServer } = await import('../support/server.js');
    server = await startTestServer(db.current.url, { plan: serverPlan() });
    reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'gate' })).secret;
    holder = createPool(db.current.url, { max: 1 });
  });
  afterAll(async () => {
    await server?.stop();
    await holder?.end();
  });

  const register = (name: string) =>
    fetch(`${server.url}/api/runner/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration_token: reg, name }) });

  /** Registrations of one name queue on its advisory lock: holding it keeps them in flight. */
  const holdName = async (name: string) => {
    const client = await holder.connect();
    await client.query('BEGIN');
    await client.query(`SELECT pg_advisory_xact_lock(hashtext('opschain.runner-name:' || $1))`, [name]);
    return async () => {
      await client.query('COMMIT');
      client.release();
    };
  };
  const waitingOnLock = async () =>
    (await db.current.pool.query(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE d.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted`)).rows[0].n as number;

  const full = REGISTRATIONS_IN_FLIGHT + REGISTRATIONS_WAITING;
  /**
   * Fills the gate: `full` registrations of a held name (the first ones wait on its lock inside
   * their transaction, the rest in the queue), then probes until one is refused. A probe that is
   * queued instead gives up after a moment, which takes it out of the queue again.
   */
  const fill = async (name: string) => {
    const held = Array.from({ length: full }, () => register(name));
    await waitFor(async () => (await waitingOnLock()) === REGISTRATIONS_IN_FLIGHT, { what: 'the registrations to wait on the name' });
    const refused = await waitFor(async () => {
      const r = await fetch(`${server.url}/api/runner/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ registration_token: reg, name: 'gate-probe' }), signal: AbortSignal.timeout(300) }).catch(() => undefined);
      return r?.status === 429 ? r : undefined;
    }, { what: 'a registration refused' });
    return { held, refused };
  };

  it(`beyond ${REGISTRATIONS_IN_FLIGHT} registrations served and ${REGISTRATIONS_WAITING} waiting the next is 429 with Retry-After at once, and passes once they end`, async () => {
    const release = await holdName('gate-held');
    let held: Array<Promise<Response>> = [];
    try {
      const filled = await fill('gate-held');
      held = filled.held;
      const refused = filled.refused!;
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toEqual({ error: { code: 'too_many_registrations', message: `too many registrations in flight on this server (${REGISTRATIONS_IN_FLIGHT} served, ${REGISTRATIONS_WAITING} waiting); retry after 1 s` } });
      // Refused before any store work: nothing of that name was written.
      expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM runners WHERE name = 'gate-probe'`)).rows[0].n).toBe(0);
    } finally {
      await release();
    }
    // One of the held ones registers the name, the rest find it taken: every permit comes back.
    const statuses = (await Promise.all(held)).map((r) => r.status).sort();
    expect(statuses).toEqual([201, ...Array.from({ length: full - 1 }, () => 409)]);
    expect((await register('gate-other')).status).toBe(201);
  });

  it('the runner honours Retry-After: refused while the server is full, it waits at least what it was told, then registers', async () => {
    const release = await holdName('gate-held-2');
    const sleeps: number[] = [];
    const clock: Clock = { now: () => Date.now(), sleep: (ms, signal) => (sleeps.push(ms), systemClock.sleep(ms, signal)) };
    const client = new RunnerClient({ servers: [server.url], log: createLogger('silent', { pretty: false }), clock, backoff: { baseMs: 10, maxMs: 20 } });
    let held: Array<Promise<Response>> = [];
    let registered: ReturnType<RunnerClient['register']> | undefined;
    try {
      held = (await fill('gate-held-2')).held;
      registered = client.register({ registration_token: reg, name: 'gate-patient' });
      await waitFor(() => sleeps.length > 0, { what: 'the runner to be refused and wait' });
    } finally {
      await release();
    }
    await Promise.all(held);
    const answer = await registered!;
    expect(answer.runner_id).toMatch(/^rnr_/);
    // Told 1 s: it waited between 1 and 1.5 s (its jitter), not its own 10–20 ms backoff.
    expect(sleeps[0]).toBeGreaterThanOrEqual(1_000);
    expect(sleeps[0]).toBeLessThanOrEqual(1_500);
  });
});
