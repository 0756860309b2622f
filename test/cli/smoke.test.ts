import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { useTestDatabase } from '../support/db.js';
import { CliProcess, runCli } from '../support/cli.js';

describe('the opschain binary', () => {
  const db = useTestDatabase();
  const home = mkdtempSync(join(tmpdir(), 'opschain-cli-'));
  let proc: CliProcess | undefined;
  afterEach(async () => {
    await proc?.stop('SIGKILL');
    proc = undefined;
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('prints help and version', async () => {
    const help = await runCli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/server/);
    expect(help.stdout).toMatch(/db/);
    const version = await runCli(['--version']);
    expect(version.code).toBe(0);
    expect(version.stdout).toMatch(/^opschain\/\d+\.\d+\.\d+/);
  });

  it('db status --json lists every migration as applied', async () => {
    const r = await runCli(['db', 'status', '--json', '--database-url', db.current.url]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.pending).toBe(0);
    expect(out.migrations[0]).toMatchObject({ id: 1, name: '0001_baseline', applied: true });
    // Table sizes, largest first, for judging the history retention.
    const runs = out.tables.find((t: { table: string }) => t.table === 'runs');
    expect(runs).toMatchObject({ table: 'runs', rows: expect.any(Number), bytes: expect.any(Number) });
    expect(runs.bytes).toBeGreaterThan(0);
  });

  it('a verb with no store anywhere says how to get one, exit 5', async () => {
    const r = await runCli(['db', 'status', '--json'], { OPSCHAIN_HOME: join(home, 'empty'), DATABASE_URL: '', OPSCHAIN_DATABASE_URL: '' });
    expect(r.code).toBe(5);
    expect(JSON.parse(r.stdout).error.code).toBe('no_store');
  });

  it('bad config stops the start with exit 2 naming the key', async () => {
    const cfg = join(home, 'bad.yaml');
    writeFileSync(cfg, 'lease_ttl: forever\n');
    const r = await runCli(['server', 'start', '--config', cfg, '--database-url', db.current.url]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/lease_ttl: expected a duration/);
    const unknown = join(home, 'unknown.yaml');
    writeFileSync(unknown, 'leese_ttl: 3m\n');
    const r2 = await runCli(['server', 'start', '--config', unknown, '--database-url', db.current.url]);
    expect(r2.code).toBe(2);
    expect(r2.stderr).toMatch(/leese_ttl: unknown key/);
    const r3 = await runCli(['server', 'start', '--database-url', 'http://nope'], {});
    expect(r3.code).toBe(2);
    expect(r3.stderr).toMatch(/database_url: expected a postgres:\/\/ URL/);
  });

  it('server start on the embedded store: ready, clean Ctrl-C, second start keeps the data', async () => {
    const h = join(home, 'embedded');
    const env = { OPSCHAIN_HOME: h, DATABASE_URL: '', OPSCHAIN_DATABASE_URL: '' };
    proc = new CliProcess(['server', 'start', '--port', '0', '--log-level', 'info'], env);
    const m = await proc.waitForOutput(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/, 60_000);
    const ready = await fetch(`${m[1]}/readyz`);
    expect(ready.status).toBe(200);
    expect(statSync(join(h, 'store.json')).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(join(h, 'server.json'), 'utf8')).url).toBe(m[1]);
    const tok = await runCli(['tokens', 'create', '--admin', '--name', 'kept', '--json'], env);
    expect(tok.code).toBe(0);
    expect(await proc.stop('SIGINT')).toBe(0);

    proc = new CliProcess(['server', 'start', '--port', '0'], env);
    const m2 = await proc.waitForOutput(/"url":"(http:\/\/127\.0\.0\.1:\d+)"/, 60_000);
    expect((await fetch(`${m2[1]}/readyz`)).status).toBe(200);
    const list = await runCli(['tokens', 'list', '--json'], env);
    expect(JSON.parse(list.stdout).tokens.map((t: { name: string }) => t.name)).toContain('kept');
    expect(await proc.stop('SIGTERM')).toBe(0);
  });
});
