import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RunnerCredentials, runnerCredentialsFeed, CREDENTIAL_TTL_MS } from '../../src/api/runner-credentials.js';
import { systemClock } from '../../src/clock.js';
import { hashSecret } from '../../src/core/tokens.js';
import { serverPlan } from '../../src/features.js';
import { createLogger } from '../../src/logger.js';
import type { ServerHandle } from '../../src/server.js';
import { fleetDrainSet } from '../../src/store/fleet.js';
import { runnersByCredentials, runnersRemove, type RunnerRow } from '../../src/store/runners.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

const row = (id: string, credentialHash: string): RunnerRow => ({
  id,
  name: id,
  group: null,
  labels: [],
  executors: ['shell'],
  maxLoad: 1,
  maxParallelSteps: 1,
  site: null,
  protocolVersion: 1,
  credentialHash,
  registeredAt: new Date(0),
  lastSeenAt: new Date(0),
  state: 'online',
  drained: false,
});

describe('RunnerCredentials (the cache)', () => {
  const clock = { t: 0, now: () => clock.t };
  const h = (s: string) => hashSecret(`ocr_${s}`);

  it('answers only while listening, and forgets everything when notices may be missed', () => {
    const c = new RunnerCredentials({ clock });
    c.put(c.mark(), [row('r1', h('a'))]);
    expect(c.get(h('a'))).toBeUndefined();
    c.listenerUp();
    c.put(c.mark(), [row('r1', h('a'))]);
    expect(c.get(h('a'))?.id).toBe('r1');
    c.listenerDown();
    expect(c.get(h('a'))).toBeUndefined();
    c.listenerUp();
    expect(c.get(h('a'))).toBeUndefined();
  });

  it('drops a runner at its notice, and does not cache a read that started before the notice', () => {
    const c = new RunnerCredentials({ clock });
    c.listenerUp();
    c.put(c.mark(), [row('r1', h('a')), row('r2', h('b'))]);
    c.invalidate('r1');
    expect(c.get(h('a'))).toBeUndefined();
    expect(c.get(h('b'))?.id).toBe('r2');
    const before = c.mark();
    c.invalidate('r3');
    c.put(before, [row('r1', h('a'))]);
    expect(c.get(h('a'))).toBeUndefined();
  });

  it('believes no entry past the TTL (the backstop for a notice lost on a half-open socket)', () => {
    const c = new RunnerCredentials({ clock });
    c.listenerUp();
    clock.t = 1_000;
    c.put(c.mark(), [row('r1', h('a'))]);
    clock.t = 1_000 + CREDENTIAL_TTL_MS - 1;
    expect(c.get(h('a'))?.id).toBe('r1');
    clock.t = 1_000 + CREDENTIAL_TTL_MS;
    expect(c.get(h('a'))).toBeUndefined();
    expect(c.size).toBe(0);
  });
});

describe('runner credential notices (real PostgreSQL)', () => {
  const db = useTestDatabase();
  const log = createLogger('silent', { pretty: false });
  const stops: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0)) await s();
  });

  /** A replica's cache with its listener, as the runner API builds it. */
  const replicaCache = async () => {
    const { credentials: c, part } = runnerCredentialsFeed({ listenUrl: db.current.url, clock: systemClock, log });
    stops.push(() => part.stop());
    await waitFor(() => c.isListening, { what: 'the credential listener' });
    return c;
  };

  const registered = async (name: string): Promise<RunnerRow> => {
    const { rows } = await db.current.pool.query(
      `INSERT INTO runners (id, name, labels, executors, max_load, max_parallel_steps, protocol_version, credential_hash, last_replica)
       VALUES ($1, $1, '{}', '{shell}', 1, 1, 1, $2, 'test') RETURNING credential_hash`,
      [name, hashSecret(`ocr_${name}`)],
    );
    const found = await runnersByCredentials(db.current.pool, [rows[0].credential_hash]);
    return found.get(rows[0].credential_hash)!;
  };

  it('a removal, a re-registration retiring a runner, a drain and a DELETE each reach every replica cache within a second', async () => {
    const caches = [await replicaCache(), await replicaCache()];
    const removed = await registered('rc-removed');
    const drained = await registered('rc-drained');
    const deleted = await registered('rc-deleted');
    const kept = await registered('rc-kept');
    for (const c of caches) c.put(c.mark(), [removed, drained, deleted, kept]);
    for (const c of caches) for (const r of [removed, drained, deleted, kept]) expect(c.get(r.credentialHash)?.id).toBe(r.id);

    const t0 = Date.now();
    await runnersRemove(db.current.pool, { ids: [removed.id] });
    await fleetDrainSet(db.current.pool, { runner: drained.id, drained: true, actor: 'test' });
    await db.current.pool.query(`DELETE FROM runners WHERE id = $1`, [deleted.id]);
    await waitFor(() => caches.every((c) => [removed, drained, deleted].every((r) => c.get(r.credentialHash) === undefined)), { timeoutMs: 5_000, intervalMs: 5, what: 'every cache to forget the changed runners' });
    expect(Date.now() - t0).toBeLessThan(1_000);
    for (const c of caches) expect(c.get(kept.credentialHash)?.id).toBe(kept.id);
  });

  it('with no listen URL (a transaction pooler) no listener starts and the cache never turns on: every credential is read from the store', async () => {
    const { credentials: c, part } = runnerCredentialsFeed({ listenUrl: null, clock: systemClock, log });
    stops.push(() => part.stop());
    const r = await registered('rc-no-listen');
    c.put(c.mark(), [r]);
    expect(c.isListening).toBe(false);
    expect(c.get(r.credentialHash)).toBeUndefined();
    expect(c.size).toBe(0);
    const listeners = await db.current.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "opschain_runner_credentials"'`);
    expect(listeners.rows[0].n).toBe(0);
  });

  it('a listener that loses its connection turns the cache off until it listens again, empty', async () => {
    const c = await replicaCache();
    const r = await registered('rc-reconnect');
    c.put(c.mark(), [r]);
    expect(c.get(r.credentialHash)?.id).toBe(r.id);
    await db.current.pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'opschain-listen'`);
    await waitFor(() => !c.isListening, { what: 'the cache to turn off' });
    expect(c.get(r.credentialHash)).toBeUndefined();
    await waitFor(() => c.isListening, { what: 'the listener to come back' });
    expect(c.get(r.credentialHash)).toBeUndefined();
  });
});

describe('runner credentials over HTTP on two replicas', () => {
  const db = useTestDatabase();
  let a: ServerHandle;
  let b: ServerHandle;
  beforeAll(async () => {
    a = await startTestServer(db.current.url, { plan: serverPlan() });
    b = await startTestServer(db.current.url, { plan: serverPlan() });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
  });

  it('a runner accepted on both replicas (from their caches) gets credential invalid on both within a second of its removal', async () => {
    const reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: 'rc' })).secret;
    const runner = await new TestRunner(a.url).register(reg, { name: 'rc-http' });
    const onB = Object.assign(new TestRunner(b.url), { credential: runner.credential, runnerId: runner.runnerId });
    // Both replicas listen for credential notices before the polls that fill their caches.
    await waitFor(async () => (await db.current.pool.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN "opschain_runner_credentials"'`)).rows[0].n >= 2, { what: 'both credential listeners' });
    for (let i = 0; i < 3; i++) for (const r of [runner, onB]) expect((await r.acquire({ wait_ms: 0 })).status).toBe(204);

    const t0 = Date.now();
    await runnersRemove(db.current.pool, { ids: [runner.runnerId] });
    for (const r of [runner, onB]) {
      await waitFor(async () => (await r.acquire({ wait_ms: 0 })).status === 401, { timeoutMs: 5_000, intervalMs: 10, what: `401 from ${r.base}` });
    }
    expect(Date.now() - t0).toBeLessThan(1_000);
    expect(await onB.acquire({ wait_ms: 0 })).toEqual({ status: 401, body: { error: { code: 'credential_invalid', message: 'credential invalid' } } });
  });
});
