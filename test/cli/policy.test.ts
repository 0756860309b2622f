import { describe, expect, it } from 'vitest';
import { queueEnqueue } from '../../src/store/queue.js';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';

describe('policy verbs', () => {
  const db = useTestDatabase();
  const cli = async (...args: string[]) => {
    const r = await runCli([...args, '--database-url', db.current.url]);
    return { ...r, json: () => JSON.parse(r.stdout) };
  };

  it('placement bind / list / unbind', async () => {
    const bound = await cli('placement', 'bind', 'acme/prod/', '--group', 'prod-runners', '--selector', 'location=dc1,dc2', '--label', 'linux', '--json');
    expect(bound.code).toBe(0);
    expect(bound.json()).toMatchObject({ path: 'acme/prod', requirement: { group: 'prod-runners', selectors: { location: ['dc1', 'dc2'] }, labels: ['linux'] } });
    const list = await cli('placement', 'list', '--json');
    expect(list.json().bindings.map((b: { path: string }) => b.path)).toEqual(['acme/prod']);
    expect((await cli('placement', 'unbind', 'acme/prod')).stdout).toMatch(/unbound acme\/prod/);
    const again = await cli('placement', 'unbind', 'acme/prod', '--json');
    expect(again.code).toBe(0);
    expect(again.json()).toEqual({ path: 'acme/prod', removed: false });
    const empty = await cli('placement', 'bind', 'acme/prod');
    expect(empty.code).toBe(2);
    expect(empty.stderr).toMatch(/say what the path requires/);
    const bad = await cli('placement', 'bind', 'acme//prod', '--group', 'g');
    expect(bad.code).toBe(2);
  });

  it('projects set / list, with a weight above 0', async () => {
    expect((await cli('projects', 'set', 'acme', '--weight', '2.5', '--json')).json()).toEqual({ name: 'acme', weight: 2.5 });
    expect((await cli('projects', 'list', '--json')).json()).toEqual({ projects: [{ name: 'acme', weight: 2.5 }] });
    const zero = await cli('projects', 'set', 'acme', '--weight', '0');
    expect(zero.code).toBe(2);
    expect(zero.stderr).toMatch(/--weight 0: expected a number from 0.001 to 100000/);
  });

  it('groups set / list: attributes merge, exclusive toggles', async () => {
    expect((await cli('groups', 'set', 'prod', '--attr', 'location=dc1', '--attr', 'tier=gold', '--exclusive')).code).toBe(0);
    const g = await cli('groups', 'set', 'prod', '--attr', 'tier=', '--json');
    expect(g.json()).toMatchObject({ name: 'prod', attributes: { location: 'dc1' }, exclusive: true });
    const off = await cli('groups', 'set', 'prod', '--no-exclusive', '--json');
    expect(off.json()).toMatchObject({ exclusive: false, attributes: { location: 'dc1' } });
    expect((await cli('groups', 'list', '--json')).json().groups).toEqual([{ name: 'prod', attributes: { location: 'dc1' }, exclusive: false, drained: false, drainReason: null, runners: 0 }]);
    expect((await cli('groups', 'set', 'prod', '--attr', 'nokey')).code).toBe(2);
  });

  it('pools set / list / unset', async () => {
    expect((await cli('pools', 'set', 'db', '3')).code).toBe(0);
    expect((await cli('pools', 'list', '--json')).json()).toEqual({ pools: [{ name: 'db', limit: 3, holders: [] }] });
    expect((await cli('pools', 'set', 'db', 'three')).code).toBe(2);
    expect((await cli('pools', 'unset', 'db', '--json')).json()).toEqual({ name: 'db', removed: true });
  });

  it('fleet drain / undrain are idempotent and audited; fleet queue shows the verdicts', async () => {
    const pool = db.current.pool;
    await insertRunner(pool, { id: 'r-1', name: 'builder', labels: ['linux'] });
    const d = await cli('fleet', 'drain', 'builder', '--reason', 'patching', '--json');
    expect(d.code).toBe(0);
    expect(d.json()).toEqual({ kind: 'runner', targets: ['r-1'], names: ['builder'], drained: true, changed: true });
    expect((await cli('fleet', 'drain', 'r-1')).stdout).toMatch(/runner builder already drained/);
    const none = await cli('fleet', 'drain', 'ghost');
    expect(none.code).toBe(3);
    expect(none.stderr).toMatch(/no runner with id or name ghost/);

    const base = { attempt: 1, priority: 0, lane: 2 as const, fairKey: 'acme', weight: 1, pools: ['db'], load: 1, runScope: false, maxParallel: 1, siteStamp: null };
    await queueEnqueue(pool, [
      { ...base, stepId: 1, runId: 1, requirement: { labels: ['linux'] } },
      { ...base, stepId: 2, runId: 1, requirement: { labels: ['gpu'] } },
    ]);
    const q = await cli('fleet', 'queue', '--json');
    expect(q.code).toBe(0);
    const entries = q.json().entries;
    expect(entries.map((e: any) => [e.stepId, e.state, e.verdict.code, e.verdict.reason])).toEqual([
      [1, 'ready', 'all_matches_drained', 'every matching runner drained (builder: patching)'],
      [2, 'ready', 'no_runner_matches', 'no runner matches: closest builder (no label gpu)'],
    ]);
    await cli('pools', 'set', 'db', '0');
    expect((await cli('fleet', 'queue', '--json')).json().entries[0].verdict.reason).toBe('pool full: db (0/0)');
    await cli('pools', 'unset', 'db');
    expect((await cli('fleet', 'undrain', 'builder', '--json')).json().changed).toBe(true);
    const human = await cli('fleet', 'queue');
    expect(human.stdout).toMatch(/waiting for a dispatch tick/);
    expect(human.stdout).toMatch(/2 ready, 0 leased, 1 unsatisfiable/);

    const nosuch = await cli('fleet', 'drain', '--group', 'edge');
    expect(nosuch.code).toBe(3);
    expect(nosuch.stderr).toMatch(/no runner group named edge/);
    expect((await pool.query(`SELECT count(*)::int AS n FROM runner_groups WHERE name = 'edge'`)).rows[0].n).toBe(0);
    expect((await cli('groups', 'set', 'edge')).code).toBe(0);
    expect((await cli('fleet', 'drain', '--group', 'edge')).stdout).toMatch(/group edge drained/);
    expect((await cli('fleet', 'undrain', '--group', 'edge')).stdout).toMatch(/group edge undrained/);
    const { rows } = await pool.query(`SELECT action, target FROM audit_log WHERE action LIKE 'fleet.%' ORDER BY id`);
    expect(rows.map((r) => `${r.action} ${r.target}`)).toEqual(['fleet.drain runner:r-1', 'fleet.drain runner:r-1', 'fleet.undrain runner:r-1', 'fleet.drain group:edge', 'fleet.undrain group:edge']);
  });
});
