import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { RunnerLockedError, runnerLockAcquire } from '../../src/runner/lock.js';
import { processStartTime } from '../../src/runner/step-records.js';

describe('runnerLockAcquire', () => {
  const dir = mkdtempSync(join(tmpdir(), 'opschain-lock-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string) => join(dir, name);

  /** Another live process, stopped whatever the outcome. */
  async function withOtherProcess(fn: (pid: number) => void | Promise<void>): Promise<void> {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      await new Promise<void>((resolve, reject) => (child.once('spawn', resolve), child.once('error', reject)));
      await fn(child.pid!);
    } finally {
      child.kill('SIGKILL');
    }
  }

  it('writes this process as the holder, and the release removes the file', () => {
    const f = file('mine.lock');
    const release = runnerLockAcquire(f);
    expect(JSON.parse(readFileSync(f, 'utf8'))).toEqual({ pid: process.pid, startTime: processStartTime(process.pid) });
    expect(runnerLockAcquire(f)).toBeTypeOf('function');
    release();
    expect(existsSync(f)).toBe(false);
  });

  it('refuses a lock a live process holds, naming its pid and the file, and leaves it as it was', async () => {
    await withOtherProcess((pid) => {
      const f = file('live.lock');
      const held = JSON.stringify({ pid, startTime: processStartTime(pid) }) + '\n';
      writeFileSync(f, held);
      let err: unknown;
      try {
        runnerLockAcquire(f);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(RunnerLockedError);
      expect((err as RunnerLockedError).pid).toBe(pid);
      expect((err as Error).message).toBe(`this runner is already running as pid ${pid} (lock ${f}); give the second one its own --name`);
      expect(readFileSync(f, 'utf8')).toBe(held);
    });
  });

  it('takes over a lock whose pid now belongs to a process started at another time (a reused pid)', async () => {
    await withOtherProcess((pid) => {
      const f = file('reused.lock');
      writeFileSync(f, JSON.stringify({ pid, startTime: '1' }) + '\n');
      const release = runnerLockAcquire(f);
      expect(JSON.parse(readFileSync(f, 'utf8')).pid).toBe(process.pid);
      release();
    });
  });

  it('takes over a lock left by a dead process, and an unreadable one', async () => {
    let deadPid = 0;
    await withOtherProcess((pid) => {
      deadPid = pid;
    });
    // Reaped once its exit is seen: /proc no longer has it.
    for (let i = 0; i < 200 && processStartTime(deadPid) !== null; i++) await new Promise((r) => setTimeout(r, 10));
    const f = file('dead.lock');
    writeFileSync(f, JSON.stringify({ pid: deadPid, startTime: '12345' }) + '\n');
    runnerLockAcquire(f)();
    writeFileSync(f, 'not json');
    const release = runnerLockAcquire(f);
    expect(JSON.parse(readFileSync(f, 'utf8')).pid).toBe(process.pid);
    release();
  });

  it('a release leaves a lock another process has taken since', () => {
    const f = file('taken.lock');
    const release = runnerLockAcquire(f);
    const theirs = JSON.stringify({ pid: process.pid + 1, startTime: null }) + '\n';
    writeFileSync(f, theirs);
    release();
    expect(readFileSync(f, 'utf8')).toBe(theirs);
  });
});
