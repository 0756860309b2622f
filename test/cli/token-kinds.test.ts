import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { hashSecret } from '../../src/core/tokens.js';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { startTestServer } from '../support/server.js';

describe('API tokens: a prefix per scope, and refusals with their own exit code', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
  });
  afterAll(async () => {
    await server?.stop();
  });
  const create = async (scope: string) => {
    const r = await runCli(['tokens', 'create', '--name', `t-${scope}`, '--scope', scope, '--json', '--database-url', db.current.url]);
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout).secret as string;
  };
  const remote = (token: string, ...args: string[]) => runCli([...args, '--server', server.url, '--token', token]);

  it('each scope has its own prefix, and each works within its scope', async () => {
    const secrets = { read: await create('read'), runs: await create('runs'), levers: await create('levers'), admin: await create('admin') };
    expect(secrets.read).toMatch(/^ocread_/);
    expect(secrets.runs).toMatch(/^ocruns_/);
    expect(secrets.levers).toMatch(/^oclevers_/);
    expect(secrets.admin).toMatch(/^ocadm_/);
    for (const s of Object.values(secrets)) expect((await remote(s, 'runs', 'list')).code).toBe(0);
    expect((await remote(secrets.levers, 'fleet', 'quiesce')).code).toBe(0);
  });

  it("the fleet quiesce's former path and field are still served (deprecated)", async () => {
    const secret = await create('levers');
    const post = (path: string) => fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' }, body: '{}' });
    expect((await post('/api/admin/fleet/resume')).status).toBe(200); // the first test left the fleet quiesced
    const old = await post('/api/admin/server/quiesce');
    expect(old.status).toBe(200);
    expect(await old.json()).toMatchObject({ changed: true, applied: ['quiesced'], posture: { fleetQuiesced: true, quiesced: true } });
    const lifted = await post('/api/admin/fleet/resume');
    expect(lifted.status).toBe(200);
    expect(await lifted.json()).toMatchObject({ changed: true, posture: { fleetQuiesced: false, quiesced: false } });
  });

  it('a token made before scoped prefixes (ocadm_ with scope read) is still accepted, for what its scope allows', async () => {
    const secret = `ocadm_${randomBytes(24).toString('base64url')}`;
    await db.current.pool.query(`INSERT INTO tokens (id, kind, name, hash, scope) VALUES ('tok_old', 'admin', 'old-read', $1, 'read')`, [hashSecret(secret)]);
    expect((await remote(secret, 'runs', 'list')).code).toBe(0);
    expect((await remote(secret, 'admin', 'platform', 'halt')).code).toBe(7);
  });

  it('401 and 403 exit 7, not 2 like a usage error', async () => {
    const unknown = await remote(`ocadm_${randomBytes(24).toString('base64url')}`, 'runs', 'list');
    expect(unknown.code).toBe(7);
    expect(unknown.stderr).toMatch(/^Error: token invalid/);
    const read = await create('read');
    const forbidden = await remote(read, 'admin', 'platform', 'halt', '--json');
    expect(forbidden.code).toBe(7);
    expect(JSON.parse(forbidden.stdout).error.code).toBe('scope_lacking');
    // A usage error is still 2.
    expect((await remote(read, 'runs', 'show')).code).toBe(2);
  });
});
