import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';
import { startTestServer } from '../support/server.js';

describe('registration tokens name the groups they may register into', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let admin: string;
  const tokens: Record<string, { id: string; secret: string }> = {};

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true, dispatch: { hooks: orchestratorHooks } } });
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'admin', scope: 'admin' })).secret;
  });
  afterAll(async () => {
    await server?.stop();
  });

  const cli = (...args: string[]) => runInProcess([...args, '--server', server.url, '--token', admin]);
  const register = async (secret: string, name: string, group?: string) => {
    const res = await fetch(`${server.url}/api/runner/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ registration_token: secret, name, ...(group ? { group } : {}) }),
    });
    return { status: res.status, body: (await res.json()) as any };
  };
  const runnerRows = async (name: string) => (await db.current.pool.query(`SELECT id, registration_token_id FROM runners WHERE name = $1`, [name])).rows;
  const registerAudits = async () => Number((await db.current.pool.query(`SELECT count(*) FROM audit_log WHERE action = 'runner.register'`)).rows[0].count);

  it('tokens create --registration --group (repeatable) records the groups, shown by tokens list in both outputs', async () => {
    expect((await cli('groups', 'set', 'prod', '--exclusive')).code).toBe(0);
    for (const [key, args] of [
      ['open', ['--name', 'open-fleet']],
      ['prod', ['--name', 'prod-fleet', '--group', 'prod', '--group', 'prod-eu']],
    ] as const) {
      const r = await cli('tokens', 'create', '--registration', ...args, '--json');
      expect(r.code).toBe(0);
      const created = JSON.parse(r.stdout);
      tokens[key] = { id: created.id, secret: created.secret };
      expect(created.groups).toEqual(key === 'prod' ? ['prod', 'prod-eu'] : []);
    }
    const list = JSON.parse((await cli('tokens', 'list', '--json')).stdout).tokens as Array<{ id: string; groups: string[] }>;
    expect(list.find((t) => t.id === tokens.prod.id)?.groups).toEqual(['prod', 'prod-eu']);
    expect(list.find((t) => t.id === tokens.open.id)?.groups).toEqual([]);
    const human = (await cli('tokens', 'list')).stdout;
    expect(human).toMatch(/groups/);
    expect(human.split('\n').find((l) => l.includes(tokens.prod.id))).toMatch(/\sprod, prod-eu\s/);
  });

  it('a token naming no groups cannot register into an exclusive group: 403 naming it, nothing written', async () => {
    const audits = await registerAudits();
    const r = await register(tokens.open.secret, 'sneaky', 'prod');
    expect(r.status).toBe(403);
    expect(r.body.error).toEqual({
      code: 'registration_group_refused',
      message: `group prod is exclusive: registration token ${tokens.open.id} names no groups; register with a token created with --group prod`,
    });
    expect(await runnerRows('sneaky')).toEqual([]);
    expect(await registerAudits()).toBe(audits);
    // It still joins a group that is not exclusive, or none.
    expect((await register(tokens.open.secret, 'builder', 'build')).status).toBe(201);
    expect((await register(tokens.open.secret, 'loose')).status).toBe(201);
  });

  it('a token naming the group registers into it, and only into the groups it names', async () => {
    const ok = await register(tokens.prod.secret, 'deployer', 'prod');
    expect(ok.status).toBe(201);
    expect(await runnerRows('deployer')).toEqual([{ id: ok.body.runner_id, registration_token_id: tokens.prod.id }]);
    for (const [name, group, where] of [['stray', 'build', 'group build'], ['groupless', undefined, 'a runner without a group']] as const) {
      const r = await register(tokens.prod.secret, name, group);
      expect(r.status).toBe(403);
      expect(r.body.error.message).toBe(`registration token ${tokens.prod.id} may register runners only into prod, prod-eu, not ${where}`);
      expect(await runnerRows(name)).toEqual([]);
    }
  });

  it('fleet runners shows the token each runner registered with', async () => {
    const view = JSON.parse((await cli('fleet', 'runners', '--json')).stdout);
    const byName = Object.fromEntries(view.runners.map((r: { name: string; registrationToken: string | null }) => [r.name, r.registrationToken]));
    expect(byName).toEqual({ deployer: tokens.prod.id, builder: tokens.open.id, loose: tokens.open.id });
    const human = (await cli('fleet', 'runners')).stdout;
    expect(human).toMatch(/registered with/);
    expect(human.split('\n').find((l) => l.includes('deployer'))).toContain(tokens.prod.id);
  });

  it('groups belong to registration tokens only, and must be names', async () => {
    const api = await cli('tokens', 'create', '--scope', 'read', '--group', 'prod');
    expect(api.code).toBe(2);
    const res = await fetch(`${server.url}/api/tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ kind: 'admin', name: 'x', scope: 'read', groups: ['prod'] }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.message).toBe('--group: only a registration token names the groups its runners may join');
    const bad = await cli('tokens', 'create', '--registration', '--group', 'pr\u009bod');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/expected a group name/);
    expect(Number((await db.current.pool.query(`SELECT count(*) FROM tokens`)).rows[0].count)).toBe(3);
  });
});
