import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Conflict } from '../../src/errors.js';
import { homeLockAcquire, serverLockPath, writeServerRecord } from '../../src/home.js';
import { processStartTime } from '../../src/runner/step-records.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';

describe('one server per home', () => {
  const db = useTestDatabase();
  const root = mkdtempSync(join(tmpdir(), 'opschain-homelock-'));
  const procs: CliProcess[] = [];
  afterAll(async () => {
    await Promise.all(procs.map((p) => p.stop('SIGKILL')));
    rmSync(root, { recursive: true, force: true });
  });

  it('refuses while a live process holds the lock, naming its pid and URL; takes over a dead one\'s', async () => {
    const home = join(root, 'unit');
    const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
    try {
      const pid = sleeper.pid!;
      await new Promise((r) => setTimeout(r, 50));
      writeServerRecord(home, { url: 'http://127.0.0.1:7999', pid, replicaId: 'r', startedAt: new Date().toISOString() });
      writeFileSync(serverLockPath(home), JSON.stringify({ pid, startTime: processStartTime(pid) }));
      expect(() => homeLockAcquire(home)).toThrow(Conflict);
      expect(() => homeLockAcquire(home)).toThrow(`an opschain server already runs on the home ${home} (pid ${pid}, http://127.0.0.1:7999)`);
    } finally {
      sleeper.kill('SIGKILL');
      await new Promise((r) => sleeper.once('exit', r));
    }
    // The holder is gone: its lock is stale and taken over.
    const release = homeLockAcquire(home);
    expect(JSON.parse(readFileSync(serverLockPath(home), 'utf8')).pid).toBe(process.pid);
    release();
    expect(() => readFileSync(serverLockPath(home))).toThrow();
  });

  it('a second server start on the same home exits 4 with the first one\'s pid and URL, and the first keeps serving', { timeout: 120_000 }, async () => {
    const home = join(root, 'cli');
    const first = new CliProcess(['server', 'start', '--database-url', db.current.url, '--port', '0', '--home', home, '--log-level', 'info'], { OPSCHAIN_HOME: home });
    procs.push(first);
    const m = await first.waitForOutput(/"url":"(http:[^"]+)"[^\n]*opschain server ready/, 60_000);
    const second = await runCli(['server', 'start', '--database-url', db.current.url, '--port', '0', '--home', home], { OPSCHAIN_HOME: home });
    expect(second.code).toBe(4);
    expect(second.stderr).toContain(`pid ${first.child.pid}, ${m[1]}`);
    expect((await fetch(`${m[1]}/readyz`)).status).toBe(200);
    expect(JSON.parse(readFileSync(join(home, 'server.json'), 'utf8')).pid).toBe(first.child.pid);
    expect(await first.stop('SIGTERM')).toBe(0);
    expect(() => readFileSync(serverLockPath(home))).toThrow();
  });
});
