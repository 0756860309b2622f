import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orchestratorHooks } from '../../src/orchestrator/progress.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { runInProcess } from '../support/inproc.js';
import { startTestServer } from '../support/server.js';

/** Nine levels, each aliasing the one above ten times: a billion copies from a few hundred bytes. */
function aliasBomb(): string {
  const letter = (i: number) => String.fromCharCode(97 + i);
  const levels = [`${letter(0)}: &${letter(0)} [${Array(10).fill('"lol"').join(',')}]`];
  for (let i = 1; i < 9; i++) levels.push(`${letter(i)}: &${letter(i)} [${Array(10).fill(`*${letter(i - 1)}`).join(',')}]`);
  return `name: bomb\nsteps:\n  s: {run: "true", env: {X: y}}\n  t:\n    run: "true"\n    placement:\n      selectors:\n${levels.map((l) => `        ${l}`).join('\n')}\n`;
}

describe('run-file bounds over HTTP and the CLI', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let runs: string;
  let dir: string;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true, dispatch: { hooks: orchestratorHooks } } });
    runs = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'runs', scope: 'runs' })).secret;
    dir = mkdtempSync(join(tmpdir(), 'opschain-bounds-'));
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const post = async (path: string, body: unknown) => {
    const res = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${runs}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
  };
  const counts = async () => (await db.current.pool.query(`SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM steps)::int AS steps, (SELECT count(*) FROM run_templates)::int AS templates`)).rows[0];

  it('POST /api/runs with a 4 MiB file answers 400 naming the 1 MiB limit, writes nothing, and the server goes on', async () => {
    const file = `name: big\nsteps: {a: {run: "true"}}\n# ${'x'.repeat(4 * 1024 * 1024 - 40)}\n`;
    expect(file.length).toBeLessThanOrEqual(4 * 1024 * 1024);
    const r = await post('/api/runs', { file });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_run_file');
    expect(r.body.error.problems).toEqual([{ path: '(file)', message: `${Buffer.byteLength(file)} bytes, larger than 1 MiB (1048576 bytes); a run file is refused above that size` }]);
    expect(await counts()).toEqual({ runs: 0, steps: 0, templates: 0 });
    const ok = await post('/api/runs', { file: 'name: fine\nsteps: {a: {run: "true"}}\n' });
    expect(ok.status).toBe(200);
    expect(await counts()).toMatchObject({ runs: 1, steps: 1 });
  });

  it('an alias bomb answers 400 naming the alias budget, for runs and for templates, and writes nothing', async () => {
    const before = await counts();
    for (const path of ['/api/runs', '/api/templates']) {
      const r = await post(path, { file: aliasBomb() });
      expect(r.status).toBe(400);
      expect(r.body.error.problems).toEqual([{ path: '(file)', message: expect.stringMatching(/^YAML aliases expand beyond the budget of 100 /) }]);
    }
    expect(await counts()).toEqual(before);
  });

  it("a run whose env, copied into each step row, passes the expanded bound answers 400 naming it", async () => {
    const file = `name: wide\nenv: {A: ${'v'.repeat(60 * 1024)}, B: ${'v'.repeat(60 * 1024)}}\nsteps:\n${Array.from({ length: 40 }, (_, i) => `  s${i}: {run: "true"}`).join('\n')}\n`;
    const before = await counts();
    const r = await post('/api/runs', { file });
    expect(r.status).toBe(400);
    expect(r.body.error.problems[0].message).toMatch(/^the run expands to more than 4 MiB \(4194304 bytes\)/);
    expect(await counts()).toEqual(before);
  });

  it('the CLI exits 2 naming the limit for an alias bomb, from the store and over HTTP', async () => {
    const bomb = join(dir, 'bomb.yaml');
    writeFileSync(bomb, aliasBomb());
    const before = await counts();
    for (const transport of [['--database-url', db.current.url], ['--server', server.url, '--token', runs]]) {
      const r = await runInProcess(['runs', 'submit', bomb, ...transport]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/YAML aliases expand beyond the budget of 100/);
    }
    expect(await counts()).toEqual(before);
  });
});
