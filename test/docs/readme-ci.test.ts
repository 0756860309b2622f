import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { BIN, ROOT } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';
import { runInProcess } from '../support/inproc.js';
import { startTestServer } from '../support/server.js';

/** The README's CI block, exactly as written there. */
function ciExample(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const m = /<!-- ci-example:start -->\n```sh\n([\s\S]*?)```\n<!-- ci-example:end -->/.exec(readme);
  if (!m) throw new Error('README has no ci-example block');
  return m[1];
}

describe('the README CI example', () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-ci-'));
  let server: ServerHandle;
  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs as written with a levers token: drains, waits, deploys, resumes; the audit shows the token', async () => {
    // The operator's once-only part, on the server's machine (straight to the store).
    const store = ['--database-url', db.current.url];
    expect((await runInProcess(['groups', 'set', 'web', ...store])).code).toBe(0);
    const made = await runInProcess(['tokens', 'create', '--name', 'ci-deploy', '--scope', 'levers', '--expires', '30d', '--json', ...store]);
    const { secret, id } = JSON.parse(made.stdout) as { secret: string; id: string };
    // A web runner with a step still running: the drain waits for it.
    await insertRunner(db.current.pool, { id: 'web-1', name: 'web-1', group: 'web' });
    await insertLease(db.current.pool, { stepId: 7, runId: 1, runnerId: 'web-1' });

    // `opschain` on the PATH, as `npm link` puts it; a home with nothing in it.
    const bin = join(dir, 'bin');
    const home = join(dir, 'home');
    for (const d of [bin, home]) rmSync(d, { recursive: true, force: true });
    mkdirSync(bin);
    mkdirSync(home);
    writeFileSync(join(bin, 'opschain'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`);
    chmodSync(join(bin, 'opschain'), 0o755);
    writeFileSync(join(dir, 'ci.sh'), ciExample());

    const env: NodeJS.ProcessEnv = { ...process.env, PATH: `${bin}:${process.env.PATH}`, OPSCHAIN_SERVER: server.url, OPSCHAIN_TOKEN: secret, OPSCHAIN_HOME: home, CI_COMMIT_SHA: 'abc123', NO_COLOR: '1' };
    delete env.OPSCHAIN_DATABASE_URL;
    delete env.DATABASE_URL;
    const child = spawn('/bin/sh', [join(dir, 'ci.sh')], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      // Once the drain is waiting on the running step, the step finishes.
      const deadline = Date.now() + 60_000;
      while (!/waiting for 1 lease/.test(out) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(out).toMatch(/group web drained/);
      await db.current.pool.query(`DELETE FROM step_leases WHERE step_id = 7`);
      expect(await exited).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
    expect(out).toMatch(/deploying abc123/);
    expect(out).toMatch(/audit needs an admin token/);
    expect(out).toMatch(/group web undrained/);
    const { rows } = await db.current.pool.query(`SELECT actor, action, detail->>'reason' AS reason FROM audit_log WHERE action LIKE 'fleet.%' ORDER BY id`);
    expect(rows).toEqual([
      { actor: `token:ci-deploy(${id})`, action: 'fleet.drain', reason: 'deploy abc123' },
      { actor: `token:ci-deploy(${id})`, action: 'fleet.undrain', reason: 'deploy abc123 ended' },
    ]);
    expect(readdirSync(home)).toEqual([]);
  });
});
