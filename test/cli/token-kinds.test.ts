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
    expect((await remote(secrets.levers, 'admin', 'server', 'quiesce')).code).toBe(0);
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
