import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CliProcess, ROOT, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';

describe('quick start: server start + runner + runs submit', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  const home = mkdtempSync(join(tmpdir(), 'opschain-quickstart-'));
  const procs: CliProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    rmSync(home, { recursive: true, force: true });
  });

  it('the runner finds the local server and registration token with no flags', async () => {
    const env = { OPSCHAIN_HOME: home, OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '', DATABASE_URL: '', OPSCHAIN_DATABASE_URL: '' };
    const server = new CliProcess(['server', 'start', '--database-url', db.current.url, '--port', '0'], env);
    procs.push(server);
    await server.waitForOutput(/opschain server ready/, 60_000);
    const runner = new CliProcess(['runner'], env);
    procs.push(runner);
    await runner.waitForOutput(/registered as rnr_/, 60_000);
    expect(statSync(join(home, 'runner')).mode & 0o777).toBe(0o700);

    const r = await runCli(['runs', 'submit', join(ROOT, 'examples', 'diamond.yaml'), '--wait', '--json', '--database-url', db.current.url], env, { timeoutMs: 90_000 });
    expect(r.code, r.stderr).toBe(0);
    const view = JSON.parse(r.stdout);
    expect(view.status).toBe('succeeded');
    expect(view.steps.map((s: { name: string; status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);

    const logs = await runCli(['runs', 'logs', String(view.id), '--step', 'a', '--database-url', db.current.url], env);
    expect(logs.stdout).toContain('hello from a');

    expect(await runner.stop('SIGTERM')).toBe(0);
    expect(runner.output).toMatch(/runner stopped/);
  });
});
