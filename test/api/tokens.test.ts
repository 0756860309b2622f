import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ReplicaPlan, ServerHandle } from '../../src/server.js';
import { stepLogAppend } from '../../src/store/logs.js';
import { tokenCheck, tokenCreate } from '../../src/store/tokens.js';
import { ROOT } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';
import { runInProcess } from '../support/inproc.js';
import { complete, deliver } from '../support/lifecycle.js';
import { startTestServer } from '../support/server.js';

describe('scoped tokens and revocation, on every replica', () => {
  const db = useTestDatabase();
  let a: ServerHandle;
  let b: ServerHandle;
  const secrets: Record<string, string> = {};
  const ids: Record<string, string> = {};
  const plan = (): ReplicaPlan => ({ ops: true, dispatch: { hooks: orchestratorHooks } });

  beforeAll(async () => {
    a = await startTestServer(db.current.url, { plan: plan(), config: { pollWindowMs: 1_000 } });
    b = await startTestServer(db.current.url, { plan: plan(), config: { pollWindowMs: 1_000 } });
    for (const scope of ['read', 'runs', 'levers', 'admin'] as const) {
      const t = await tokenCreate(db.current.pool, { kind: 'admin', name: `t-${scope}`, scope });
      secrets[scope] = t.secret;
      ids[scope] = t.token.id;
    }
    await insertRunner(db.current.pool, { id: 'r-1', name: 'builder', labels: ['linux'] });
  });
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
  });

  const call = async (server: ServerHandle, method: string, path: string, token?: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
  };
  const cli = (token: string, ...args: string[]) => runInProcess([...args, '--server', a.url, '--token', token]);

  it('a levers token drains and undrains, and gets 403 naming the scope on tokens create and platform halt', async () => {
    expect((await cli(secrets.levers, 'fleet', 'drain', 'builder', '--reason', 'deploy', '--json')).code).toBe(0);
    expect((await cli(secrets.levers, 'fleet', 'undrain', 'builder', '--json')).code).toBe(0);
    const create = await cli(secrets.levers, 'tokens', 'create', '--name', 'x', '--scope', 'read', '--json');
    expect(create.code).toBe(7);
    expect(JSON.parse(create.stdout).error).toEqual({ code: 'scope_lacking', message: 'token t-levers has scope levers; POST /api/tokens needs scope admin' });
    const halt = await cli(secrets.levers, 'admin', 'platform', 'halt');
    expect(halt.code).toBe(7);
    expect(halt.stderr).toMatch(/^Error: token t-levers has scope levers; POST \/api\/admin\/platform\/halt needs scope admin/);
    expect((await db.current.pool.query(`SELECT halted FROM fleet_posture`)).rows[0]?.halted ?? false).toBe(false);
    const { rows } = await db.current.pool.query(`SELECT actor, action FROM audit_log WHERE action LIKE 'fleet.%' ORDER BY id`);
    expect(rows).toEqual([
      { actor: `token:t-levers(${ids.levers})`, action: 'fleet.drain' },
      { actor: `token:t-levers(${ids.levers})`, action: 'fleet.undrain' },
    ]);
  });

  it('a read token reads every GET and nothing else; no token is 401', async () => {
    expect((await call(b, 'GET', '/api/fleet/queue', secrets.read)).status).toBe(200);
    expect((await call(b, 'GET', '/api/runs', secrets.read)).status).toBe(200);
    expect((await call(b, 'POST', '/api/fleet/drain', secrets.read, { runner: 'builder' })).status).toBe(403);
    expect((await call(b, 'GET', '/api/tokens', secrets.read)).status).toBe(403);
    expect((await call(b, 'GET', '/api/runs')).status).toBe(401);
  });

  it('a runs token submits and follows a run; the follow exits as --wait does', async () => {
    const submitted = await cli(secrets.runs, 'runs', 'submit', join(ROOT, 'examples', 'hello.yaml'), '--json');
    expect(submitted.code).toBe(0);
    const id = JSON.parse(submitted.stdout).id as number;
    expect(JSON.parse(submitted.stdout).createdBy).toBe(`token:t-runs(${ids.runs})`);
    const follow = cli(secrets.runs, 'runs', 'logs', String(id), '--follow');
    const lease = await deliver(db.current.pool, { run: id, step: 'hello', runnerId: 'r-1' });
    await stepLogAppend(db.current.pool, { stepId: lease.stepId, attempt: 1, chunks: [{ stream: 'stdout', text: 'hi from the runner\n' }] });
    await complete(db.current.pool, lease, { status: 'failed', runnerId: 'r-1' });
    const done = await follow;
    expect(done.stdout).toMatch(/hello \| hi from the runner/);
    expect(done.code).toBe(1);
    expect((await cli(secrets.runs, 'runs', 'retry', String(id), '--json')).code).toBe(0);
    expect((await cli(secrets.runs, 'pools', 'set', 'db', '3')).code).toBe(7);
  });

  it('a revoked token is 401 on every replica, and so is an expired one', async () => {
    const t = await tokenCreate(db.current.pool, { kind: 'admin', name: 'short', scope: 'read' });
    expect((await call(a, 'GET', '/api/runs', t.secret)).status).toBe(200);
    const revoke = await runInProcess(['tokens', 'revoke', t.token.id, '--server', b.url, '--token', secrets.admin, '--json']);
    expect(revoke.code).toBe(0);
    for (const s of [a, b]) expect(await call(s, 'GET', '/api/runs', t.secret)).toMatchObject({ status: 401, body: { error: { code: 'token_revoked' } } });
    const e = await tokenCreate(db.current.pool, { kind: 'admin', name: 'expiring', scope: 'admin', expiresInMs: 60_000 });
    expect((await call(a, 'GET', '/api/tokens', e.secret)).status).toBe(200);
    // Expiry is judged by the store's clock: move the expiry into the past rather than wait.
    await db.current.pool.query(`UPDATE tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [e.token.id]);
    for (const s of [a, b]) expect(await call(s, 'GET', '/api/tokens', e.secret)).toMatchObject({ status: 401, body: { error: { code: 'token_expired' } } });
    const list = await cli(secrets.admin, 'tokens', 'list', '--json');
    const row = JSON.parse(list.stdout).tokens.find((x: { id: string }) => x.id === e.token.id);
    expect(row).toMatchObject({ scope: 'admin', expiresAt: expect.any(String), lastUsedAt: expect.any(String) });
  });

  it('expiry is judged at the time the check is given, the store\'s clock when none, and only a live check records a use', async () => {
    const pool = db.current.pool;
    const e = await tokenCreate(pool, { kind: 'admin', name: 'hour', scope: 'read', expiresInMs: 3_600_000 });
    const { rows } = await pool.query(`SELECT expires_at FROM tokens WHERE id = $1`, [e.token.id]);
    const expiresAt: Date = rows[0].expires_at;
    // The stored expiry has microseconds, a Date only milliseconds: one millisecond either side.
    const just = new Date(expiresAt.getTime() - 1);
    const past = new Date(expiresAt.getTime() + 1);
    expect(await tokenCheck(pool, 'admin', e.secret)).toMatchObject({ ok: true });
    expect(await tokenCheck(pool, 'admin', e.secret, { now: just })).toMatchObject({ ok: true, token: { lastUsedAt: just } });
    expect(await tokenCheck(pool, 'admin', e.secret, { now: past })).toMatchObject({ ok: false, reason: 'expired', token: { lastUsedAt: just } });
    // The stored row is untouched by the check at a later time: now, by the store's clock, it is live.
    expect(await tokenCheck(pool, 'admin', e.secret)).toMatchObject({ ok: true });
  });

  it('a removed runner, and the runners of a revoked registration token, get credential invalid on their next call', async () => {
    const reg = await tokenCreate(db.current.pool, { kind: 'registration', name: 'fleet' });
    const register = async (name: string) => (await call(a, 'POST', '/api/runner/register', undefined, { registration_token: reg.secret, name })).body as { runner_id: string; credential: string };
    const poll = (s: ServerHandle, credential: string) => call(s, 'POST', '/api/runner/acquire', credential, { request_id: `p-${Math.random()}`, wait_ms: 0 });
    const one = await register('doomed');
    const two = await register('fleet-a');
    const three = await register('fleet-b');
    // Accepted: an offer (the retried run above is queued) or an empty answer.
    for (const r of [one, two, three]) expect([200, 204]).toContain((await poll(b, r.credential)).status);
    const removed = await runInProcess(['fleet', 'runners', 'remove', 'doomed', '--database-url', db.current.url, '--json']);
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout)).toEqual({ removed: [{ id: one.runner_id, name: 'doomed' }] });
    const refused = { status: 401, body: { error: { code: 'credential_invalid', message: 'credential invalid' } } };
    // Both replicas hold the credential in their caches (`a` from the registration, `b` from the
    // poll), which forget it at the removal's notice: refused within a second is the promise, not
    // instantly (the bound itself is held by test/api/runner-credentials.test.ts).
    for (const [s, which] of [[a, 'first'], [b, 'second']] as const) {
      await waitFor(async () => (await poll(s, one.credential)).status === 401, { timeoutMs: 5_000, intervalMs: 20, what: `the removed runner refused on the ${which} replica` });
      expect(await poll(s, one.credential)).toEqual(refused);
    }
    expect([200, 204]).toContain((await poll(b, two.credential)).status);
    const revoked = await cli(secrets.admin, 'tokens', 'revoke', reg.token.id, '--runners', '--json');
    expect(revoked.code).toBe(0);
    expect(JSON.parse(revoked.stdout).runnersRemoved.map((r: { name: string }) => r.name).sort()).toEqual(['fleet-a', 'fleet-b']);
    for (const r of [two, three]) await waitFor(async () => (await poll(b, r.credential)).status === 401, { what: `${r.runner_id} refused` });
    expect((await runInProcess(['fleet', 'runners', 'remove', 'doomed', '--database-url', db.current.url])).code).toBe(3);
  });
});
