import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { runInProcess } from '../support/inproc.js';
import { startTestServer } from '../support/server.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';

describe('admin audit', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runInProcess([...args, '--database-url', db.current.url]);
  const json = async (...args: string[]) => {
    const r = await cli(...args, '--json');
    expect(r.code, r.stdout + r.stderr).toBe(0);
    return JSON.parse(r.stdout);
  };

  it('shows actor and reason for each lever, newest first, filtered by actor and time', async () => {
    await insertRunner(db.current.pool, { id: 'rnr_a', name: 'build-a' });
    await json('fleet', 'drain', 'build-a', '--reason', 'kernel update');
    await json('fleet', 'quiesce', '--reason', 'deploy 4.2');
    await json('pools', 'set', 'db', '3');
    // A lever pulled over HTTP records its token; the filter finds it by part of the name.
    await db.current.pool.query(`INSERT INTO audit_log (actor, action, target, source, detail) VALUES ('token:ci-deploy(tok_1)', 'server.resume', 'fleet', '10.0.0.7', '{"reason": "deploy done"}')`);

    const all = await json('admin', 'audit');
    const user = all.entries.find((e: any) => e.action === 'fleet.drain').actor;
    expect(user).toMatch(/^cli:.+/);
    expect(all.entries.map((e: any) => [e.action, e.actor, e.reason, e.target])).toEqual([
      ['server.resume', 'token:ci-deploy(tok_1)', 'deploy done', 'fleet'],
      ['pools.set', expect.any(String), null, 'db'],
      ['server.quiesce', user, 'deploy 4.2', 'fleet'],
      ['fleet.drain', user, 'kernel update', 'runner:rnr_a'],
    ]);
    expect(all).toMatchObject({ limit: 200, more: false });

    const ci = await json('admin', 'audit', '--actor', 'CI-DEPLOY');
    expect(ci.entries.map((e: any) => e.action)).toEqual(['server.resume']);
    // LIKE wildcards in the filter are literal.
    expect((await json('admin', 'audit', '--actor', '%')).entries).toEqual([]);
    expect((await json('admin', 'audit', '--since', '1h')).entries).toHaveLength(4);
    expect((await json('admin', 'audit', '--since', '2999-01-01T00:00:00Z')).entries).toEqual([]);
    const limited = await json('admin', 'audit', '--limit', '2');
    expect(limited).toMatchObject({ limit: 2, more: true });
    expect(limited.entries).toHaveLength(2);

    const human = await cli('admin', 'audit', '--actor', 'ci-deploy');
    expect(human.stdout).toContain('token:ci-deploy(tok_1)');
    expect(human.stdout).toContain('deploy done');
  });

  it('refuses a bad --since or --actor, naming it', async () => {
    const r = await cli('admin', 'audit', '--since', 'yesterday', '--json');
    expect(r.code).toBe(2);
    expect(JSON.parse(r.stdout).error.message).toMatch(/^--since: expected a span back from now/);
    expect((await cli('admin', 'audit', '--actor', ' ')).code).toBe(2);
  });

  describe('over HTTP', () => {
    let server: ServerHandle;
    let levers: string;
    let admin: string;
    beforeAll(async () => {
      server = await startTestServer(db.current.url, { plan: { ops: true } });
      levers = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'ci-deploy', scope: 'levers' })).secret;
      admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'auditor', scope: 'admin' })).secret;
    });
    afterAll(async () => server?.stop());
    const remote = (token: string, ...args: string[]) => runInProcess([...args, '--server', server.url, '--token', token, '--json']);

    it('records the token as the actor of a lever pulled remotely, and lists it to an admin token only', async () => {
      await json('fleet', 'resume'); // the first test left the fleet quiesced
      const pulled = await remote(levers, 'fleet', 'quiesce', '--reason', 'deploy 4.3', '--until', '1h');
      expect(pulled.code, pulled.stdout).toBe(0);
      const denied = await remote(levers, 'admin', 'audit');
      expect(denied.code).not.toBe(0);
      expect(JSON.parse(denied.stdout).error.code).toBe('scope_lacking');
      const view = JSON.parse((await remote(admin, 'admin', 'audit', '--actor', 'ci-deploy', '--since', '10m')).stdout);
      expect(view.entries).toHaveLength(2); // and the row the first test wrote
      expect(view.entries[0]).toMatchObject({ action: 'server.quiesce', target: 'fleet', reason: 'deploy 4.3', actor: expect.stringMatching(/^token:ci-deploy/), detail: { posture: 'quiesced' } });
      // The same row, read straight from the store.
      const local = await json('admin', 'audit', '--actor', 'ci-deploy');
      expect(local.entries).toEqual(view.entries);
      expect(JSON.parse((await remote(admin, 'admin', 'audit', '--since', 'yesterday')).stdout).error.code).toBe('invalid_input');
    });
  });
});
