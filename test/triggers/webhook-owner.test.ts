import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { webhookSignature } from '../../src/core/triggers.js';
import { createLogger } from '../../src/logger.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { deliveryCount } from '../../src/store/triggers.js';
import { DEFAULT_LAUNCH_TIMING, DeferredLaunches, launchOnce } from '../../src/triggers/launch.js';
import { templatePut } from '../../src/ops/domain/trigger-definitions.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';
import { startTestServer } from '../support/server.js';

// A webhook's secret is minted by the token that created it and is worth no more than that token.

const TEMPLATE = `name: deploy\nenv: { GIT_REF: none }\nsteps:\n  show:\n    run: echo "$GIT_REF"\n`;

describe('a webhook answers only while the token that created it is live', () => {
  const db = useTestDatabase();
  const home = mkdtempSync(join(tmpdir(), 'opschain-owner-home-'));
  let server: ServerHandle;
  let admin: { id: string; secret: string };
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { webhooks: true, ops: true } });
    await templatePut(db.current.pool, { text: TEMPLATE, actor: 'test' });
    const made = await tokenCreate(db.current.pool, { kind: 'admin', name: 'root', scope: 'admin' });
    admin = { id: made.token.id, secret: made.secret };
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(home, { recursive: true, force: true });
  });

  const api = async (method: string, path: string, token: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  let seq = 0;
  const deliver = async (id: number, secret: string) => {
    const body = JSON.stringify({ ref: `refs/heads/r${++seq}` });
    const ts = String(Math.floor(Date.now() / 1000));
    const res = await fetch(`${server.url}/api/hooks/${id}`, {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', 'x-opschain-timestamp': ts, 'x-opschain-signature': webhookSignature(secret, ts, Buffer.from(body)), 'x-opschain-delivery': `d-${seq}` },
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const cli = (args: string[]) => runInProcess([...args, '--server', server.url, '--token', admin.secret, '--home', home]);
  const launch = (now?: Date) =>
    launchOnce({ pool: db.current.pool, log: createLogger('silent', { pretty: false }), deferred: new DeferredLaunches(), timing: DEFAULT_LAUNCH_TIMING, isLeader: () => true }, now);

  it('revoked: the webhook answers 401 and records nothing; its one-shot still fires; an admin rotate re-owns it', async () => {
    const ci = await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci-deploy', scope: 'runs' });
    const hook = await api('POST', '/api/triggers/webhooks', ci.secret, { template: 'deploy', map: ['env.GIT_REF=$.ref'] });
    expect(hook.status).toBe(200);
    expect(hook.body.owner).toEqual({ tokenId: ci.token.id, name: 'ci-deploy', state: 'live' });
    const shot = await api('POST', '/api/triggers/once', ci.secret, { template: 'deploy', at: '+1s' });
    expect(shot.status).toBe(200);
    expect(shot.body.owner).toBeNull();
    expect((await deliver(hook.body.id, hook.body.secret)).status).toBe(202);
    expect(await deliveryCount(db.current.pool, hook.body.id)).toBe(1);

    expect((await api('POST', `/api/tokens/${ci.token.id}/revoke`, admin.secret, {})).status).toBe(200);
    const refused = await deliver(hook.body.id, hook.body.secret);
    expect(refused).toEqual({
      status: 401,
      body: { error: { code: 'owner_token_revoked', message: `webhook ${hook.body.id}: the token that created it (${ci.token.id}) was revoked; an admin can issue a new secret with 'opschain triggers webhook rotate ${hook.body.id}'` } },
    });
    expect(await deliveryCount(db.current.pool, hook.body.id)).toBe(1);

    // `triggers show` names the owner and its state, as JSON and for people.
    const shown = await cli(['triggers', 'show', String(hook.body.id), '--json']);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).owner).toEqual({ tokenId: ci.token.id, name: 'ci-deploy', state: 'revoked' });
    const human = await cli(['triggers', 'show', String(hook.body.id)]);
    expect(human.stdout).toContain(`owner: token ci-deploy (${ci.token.id}), revoked: the webhook answers 401 until an admin runs 'opschain triggers webhook rotate'`);

    // Schedules and one-shots mint no credential: the one-shot added with the revoked token fires.
    const { rows: later } = await db.current.pool.query(`SELECT fire_at + interval '1 second' AS t FROM one_shots WHERE id = $1`, [shot.body.id]);
    const pass = await launch(later[0].t);
    expect(pass.fired.map((f) => f.triggerId).sort()).toEqual([hook.body.id, shot.body.id].sort());

    // Only an admin re-owns it: the revoked token is refused, a live runs token lacks the scope.
    expect((await api('POST', `/api/triggers/webhooks/${hook.body.id}/rotate`, ci.secret, {})).status).toBe(401);
    const runsOnly = await tokenCreate(db.current.pool, { kind: 'admin', name: 'runs-only', scope: 'runs' });
    expect((await api('POST', `/api/triggers/webhooks/${hook.body.id}/rotate`, runsOnly.secret, {})).status).toBe(403);

    const rotated = await cli(['triggers', 'webhook', 'rotate', String(hook.body.id), '--json']);
    expect(rotated.code).toBe(0);
    const fresh = JSON.parse(rotated.stdout);
    expect(fresh.owner).toEqual({ tokenId: admin.id, name: 'root', state: 'live' });
    expect(fresh.secret).toMatch(/^ocwhk_/);
    expect(fresh.secret).not.toBe(hook.body.secret);
    expect((await deliver(hook.body.id, fresh.secret)).status).toBe(202);
    const old = await deliver(hook.body.id, hook.body.secret);
    expect(old.status).toBe(401);
    expect(old.body.error.message).toBe('signature does not match');
    expect(await deliveryCount(db.current.pool, hook.body.id)).toBe(2);
    const audit = await db.current.pool.query(`SELECT actor, detail FROM audit_log WHERE action = 'triggers.webhook.rotate'`);
    expect(audit.rows).toEqual([{ actor: `token:root(${admin.id})`, detail: { previousOwner: ci.token.id, owner: admin.id } }]);
  });

  it('expired: the webhook answers 401 from the moment its token expires', async () => {
    const short = await tokenCreate(db.current.pool, { kind: 'admin', name: 'short', scope: 'runs', expiresInMs: 3_600_000 });
    const hook = await api('POST', '/api/triggers/webhooks', short.secret, { template: 'deploy' });
    expect((await deliver(hook.body.id, hook.body.secret)).status).toBe(202);
    await db.current.pool.query(`UPDATE tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, [short.token.id]);
    const refused = await deliver(hook.body.id, hook.body.secret);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('owner_token_expired');
    expect(await deliveryCount(db.current.pool, hook.body.id)).toBe(1);
    expect((await api('GET', `/api/triggers/${hook.body.id}`, admin.secret)).body.owner).toEqual({ tokenId: short.token.id, name: 'short', state: 'expired' });
  });

  it('rotate refuses what is not a webhook (400) and an unknown id (404), changing nothing', async () => {
    const shot = await api('POST', '/api/triggers/once', admin.secret, { template: 'deploy', at: '+1h' });
    const notHook = await api('POST', `/api/triggers/webhooks/${shot.body.id}/rotate`, admin.secret, {});
    expect(notHook.status).toBe(400);
    expect(notHook.body.error.message).toBe(`trigger ${shot.body.id} is a one-shot: only a webhook has a secret to rotate`);
    expect((await api('POST', '/api/triggers/webhooks/424242/rotate', admin.secret, {})).status).toBe(404);
  });
});
