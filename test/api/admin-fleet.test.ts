import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { queueEnqueue } from '../../src/store/queue.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';
import { startTestServer } from '../support/server.js';

describe('the fleet admin API', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ops' })).secret;
  });
  afterAll(async () => server?.stop());

  const call = async (method: 'GET' | 'POST', path: string, body?: unknown, token: string | null = admin) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: (await res.json()) as any };
  };

  it('is closed without an admin token', async () => {
    expect((await call('GET', '/api/fleet/queue', undefined, null)).status).toBe(401);
    expect((await call('POST', '/api/fleet/drain', { group: 'g' }, null)).status).toBe(401);
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM runner_groups`)).rows[0].n).toBe(0);
  });

  it('drains and undrains idempotently, audited with the token, and the queue shows the verdict', async () => {
    await insertRunner(db.current.pool, { id: 'r-api', name: 'api-runner', labels: ['x-api'] });
    await queueEnqueue(db.current.pool, [
      { stepId: 1, runId: 1, attempt: 1, priority: 0, lane: 2, fairKey: 'acme', pools: [], requirement: { labels: ['x-api'] }, load: 1, runScope: false, maxParallel: 1, siteStamp: null },
    ]);
    const d = await call('POST', '/api/fleet/drain', { runner: 'api-runner', reason: 'patch' });
    expect(d).toEqual({ status: 200, body: { kind: 'runner', targets: ['r-api'], names: ['api-runner'], drained: true, changed: true } });
    expect((await call('POST', '/api/fleet/drain', { runner: 'r-api' })).body.changed).toBe(false);
    const q = await call('GET', '/api/fleet/queue');
    expect(q.status).toBe(200);
    expect(q.body.entries[0].verdict).toEqual({ code: 'all_matches_drained', reason: 'every matching runner drained (api-runner: patch)', satisfiable: true, runner: null });
    expect((await call('POST', '/api/fleet/undrain', { runner: 'r-api' })).body).toMatchObject({ drained: false, changed: true });
    const limited = await call('GET', '/api/fleet/queue?limit=5');
    expect(limited.body).toMatchObject({ summary: { ready: 1 } });
    expect(limited.body.entries[0].verdict.code).toBe('waiting_for_tick');
    const { rows } = await db.current.pool.query(`SELECT actor, action FROM audit_log WHERE action LIKE 'fleet.%' ORDER BY id`);
    expect(rows.map((r) => r.action)).toEqual(['fleet.drain', 'fleet.drain', 'fleet.undrain']);
    expect(rows[0].actor).toMatch(/^token:ops\(/);
  });

  it('refuses a bad body, naming why, and an unknown runner with 404', async () => {
    expect((await call('POST', '/api/fleet/drain', {})).status).toBe(400);
    expect((await call('POST', '/api/fleet/drain', { runner: 'a', group: 'b' })).status).toBe(400);
    expect((await call('POST', '/api/fleet/drain', { runner: 'a', extra: 1 })).status).toBe(400);
    expect(await call('POST', '/api/fleet/drain', { runner: 'ghost' })).toEqual({ status: 404, body: { error: { code: 'not_found', message: 'no runner with id or name ghost' } } });
  });
});
