import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { Fleet } from './e2e-support.js';

// `opschain runner 2>&1 | tee log`, then Ctrl-C: the terminal signals the whole pipeline, tee
// is gone at once, and every later log line the runner writes meets a closed pipe.
describe('a runner whose output pipe is closed', { timeout: 90_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ pollWindowMs: 50_000 });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  const start = async (name: string) => {
    const child = spawn(
      process.execPath,
      [BIN, 'runner', '--server', fleet.servers[0].url, '--registration-token', fleet.registrationToken, '--name', name, '--work-dir', fleet.path(`work-${name}`), '--log-level', 'info'],
      { env: { ...process.env, NO_COLOR: '1', OPSCHAIN_HOME: join(fleet.dir, `home-${name}`), OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    children.push(child);
    const exited = new Promise<{ code: number | null; at: number }>((r) => child.on('exit', (code) => r({ code, at: Date.now() })));
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    await waitFor(() => /"runner_id":"rnr_/.test(out), { what: 'runner ready', timeoutMs: 60_000 });
    return { child, exited };
  };

  it('SIGINT after both pipes close: it stops promptly and exits 0', async () => {
    const { child, exited } = await start('piped');
    // The reader goes away, as tee does on Ctrl-C.
    child.stdout!.destroy();
    child.stderr!.destroy();
    const signalled = Date.now();
    child.kill('SIGINT');
    const end = await exited;
    expect(end.at - signalled).toBeLessThan(10_000);
    expect(end.code).toBe(0);
  });

  it('a closed pipe with no signal: the next log line ends it cleanly, not a wedged process', async () => {
    const { child, exited } = await start('orphaned');
    child.stdout!.destroy();
    child.stderr!.destroy();
    // A step's start and end are logged: the first write to the closed pipe.
    const runId = await fleet.submit({ name: 'log-me', steps: { one: { run: 'true' } } });
    const end = await exited;
    expect(end.code).toBe(0);
    // A graceful stop: the step it had taken still ran and reported.
    expect(await fleet.runDone(runId, 10_000)).toMatchObject({ status: 'succeeded' });
  });
});
