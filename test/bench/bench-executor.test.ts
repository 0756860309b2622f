import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { benchExecute } from '../../bench/chaos/bench-executor.js';
import { parseSideEffects } from '../../bench/chaos/checker.js';
import { SIDE_EFFECT } from '../../bench/chaos/schedule.js';

describe('the chaos bench executor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'opschain-bench-exec-'));
  const side = join(dir, 'side-effects.log');
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const req = (command: string, attempt: number, timeoutMs?: number) => ({
    command,
    cwd: dir,
    env: { OPSCHAIN_RUN_ID: '7', OPSCHAIN_STEP: 'w1', OPSCHAIN_ATTEMPT: String(attempt), CHAOS_SIDE: side, PATH: process.env.PATH },
    timeoutMs,
    onOutput: () => {},
  });
  const effects = () => parseSideEffects(readFileSync(side, 'utf8'));

  it('runs a workload step in-process: its side effect once, then its sleep', async () => {
    const t0 = Date.now();
    const e = benchExecute(req(`${SIDE_EFFECT}; sleep 0.2`, 1));
    expect(e.pid).toBeUndefined();
    expect(await e.done).toEqual({ exitCode: 0, signal: null, timedOut: false, cause: null });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(effects()).toEqual([{ runId: 7, step: 'w1', attempt: 1, pid: process.pid }]);
  });

  it('ends a step at once when it is killed (a fenced lease) or times out', async () => {
    const killed = benchExecute(req(`${SIDE_EFFECT}; sleep 30`, 2));
    killed.kill('lease expired or revoked');
    expect(await killed.done).toMatchObject({ exitCode: null, cause: 'lease expired or revoked' });
    const slow = await benchExecute(req(`${SIDE_EFFECT}; sleep 30`, 3, 100)).done;
    expect(slow).toMatchObject({ exitCode: null, timedOut: true, cause: 'timed out after 100ms' });
    expect(effects().map((e) => e.attempt)).toEqual([1, 2, 3]);
  });

  it('hands any other command to the shell', async () => {
    const e = benchExecute(req(`echo "$OPSCHAIN_RUN_ID shell $OPSCHAIN_ATTEMPT $$" >> "$CHAOS_SIDE"; exit 3`, 4));
    expect(e.pid).toBeGreaterThan(0);
    expect((await e.done).exitCode).toBe(3);
    expect(effects().at(-1)).toMatchObject({ runId: 7, step: 'shell', attempt: 4 });
    expect(effects().at(-1)!.pid).not.toBe(process.pid);
  });
});
