import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../support/db.js';
import { alive } from './process-state.js';
import { execute } from '../../src/runner/executor.js';


describe('executor', () => {
  const dir = mkdtempSync(join(tmpdir(), 'opschain-exec-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function run(command: string, opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; killGraceMs?: number } = {}) {
    const out: Array<[string, string]> = [];
    const exec = execute({ command, cwd: dir, env: opts.env ?? { PATH: process.env.PATH }, timeoutMs: opts.timeoutMs, killGraceMs: opts.killGraceMs, onOutput: (s, t) => out.push([s, t]) });
    const text = (stream: string) => out.filter(([s]) => s === stream).map(([, t]) => t).join('');
    return { exec, out, text };
  }

  it('reports the exit code and both streams, in the work directory, with the given env', async () => {
    const r = run('echo "$GREETING from $(pwd)"; echo oops >&2; exit 3', { env: { PATH: process.env.PATH, GREETING: 'hello' } });
    const result = await r.exec.done;
    expect(result).toEqual({ exitCode: 3, signal: null, timedOut: false, cause: null });
    expect(r.text('stdout')).toBe(`hello from ${dir}\n`);
    expect(r.text('stderr')).toBe('oops\n');
  });

  it('exit 0 is success; multi-byte characters split across reads arrive whole', async () => {
    const r = run(`printf 'h\\303'; sleep 0.05; printf '\\251llo\\n'`);
    const result = await r.exec.done;
    expect(result.exitCode).toBe(0);
    expect(r.text('stdout')).toBe('héllo\n');
  });

  it('a timeout kills the whole process group, background jobs included, and names the cause', async () => {
    const pidFile = join(dir, 'bg.pid');
    const r = run(`sleep 300 & echo $! > ${pidFile}; trap '' TERM; sleep 300`, { timeoutMs: 300, killGraceMs: 200 });
    const result = await r.exec.done;
    expect(result.timedOut).toBe(true);
    expect(result.exitCode).toBeNull();
    expect(result.cause).toBe('timed out after 300ms');
    const bg = Number(readFileSync(pidFile, 'utf8').trim());
    await waitFor(() => !alive(bg), { what: 'background job killed' });
    expect(alive(r.exec.pid!)).toBe(false);
  });

  it('kill() ends the group with SIGTERM and reports the given cause', async () => {
    const r = run('echo started; sleep 300');
    await waitFor(() => r.text('stdout').includes('started'));
    r.exec.kill('lease expired or revoked');
    const result = await r.exec.done;
    expect(result).toMatchObject({ exitCode: null, timedOut: false, cause: 'lease expired or revoked' });
  });

  it('background jobs left behind by a finished step are ended with it', async () => {
    const pidFile = join(dir, 'left.pid');
    // The step ends once the leftover has written its pid (not after a fixed sleep: a busy machine may not have run it yet).
    const r = run(`(sleep 300 >/dev/null 2>&1 &) ; sh -c 'echo $$ > ${pidFile}; exec sleep 300' > /dev/null 2>&1 & while [ ! -s ${pidFile} ]; do sleep 0.02; done; exit 0`);
    const result = await r.exec.done;
    expect(result.exitCode).toBe(0);
    const left = Number(readFileSync(pidFile, 'utf8').trim());
    await waitFor(() => !alive(left), { what: 'leftover killed' });
  });

  it('a step killed by a signal of its own fails with that signal as the cause', async () => {
    const r = run('kill -KILL $$');
    const result = await r.exec.done;
    expect(result).toMatchObject({ exitCode: null, signal: 'SIGKILL', cause: 'killed by SIGKILL' });
  });

  it('a process that left the step\'s group with setsid is ended with the step too', async () => {
    const pidFile = join(dir, 'setsid.pid');
    const r = run(`setsid sh -c 'echo $$ > ${pidFile}; exec sleep 300' >/dev/null 2>&1 < /dev/null & while [ ! -s ${pidFile} ]; do sleep 0.02; done; exit 0`);
    const result = await r.exec.done;
    expect(result.exitCode).toBe(0);
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    try {
      await waitFor(() => !alive(pid), { timeoutMs: 10_000, what: 'the setsid process to end' });
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  it('kill() reaches a setsid escapee during the step as well', async () => {
    const pidFile = join(dir, 'setsid2.pid');
    const r = run(`setsid sh -c 'echo $$ > ${pidFile}; trap "" TERM; exec sleep 300' >/dev/null 2>&1 < /dev/null & sleep 300`, { killGraceMs: 200 });
    const pid = await waitFor(() => {
      try {
        return Number(readFileSync(pidFile, 'utf8').trim());
      } catch {
        return 0;
      }
    });
    r.exec.kill('cancelled');
    await r.exec.done;
    try {
      await waitFor(() => !alive(pid), { timeoutMs: 10_000, what: 'the setsid process to end' });
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  const root = process.getuid?.() === 0;
  it.skipIf(!root)('as --step-user, a step runs as that user and cannot read a 0600 secret of the runner\'s', async () => {
    const { chmodSync, chownSync, mkdirSync, writeFileSync } = await import('node:fs');
    const { resolveStepUser } = await import('../../src/runner/step-env.js');
    const user = resolveStepUser('nobody');
    const secret = join(dir, 'admin.token');
    writeFileSync(secret, 'ocadm_secret\n', { mode: 0o600 });
    chmodSync(dir, 0o711);
    const work = join(dir, 'nobody-work');
    mkdirSync(work, { mode: 0o700 });
    chownSync(work, user.uid, user.gid);
    const out: string[] = [];
    const exec = execute({ command: `id -u; pwd; cat ${secret} || echo refused`, cwd: work, env: { PATH: process.env.PATH }, user, onOutput: (_s, t) => out.push(t) });
    const result = await exec.done;
    expect(result.cause).toBeNull();
    const text = out.join('');
    expect(text).toContain(`${user.uid}\n${work}\n`);
    expect(text).toContain('refused');
    expect(text).not.toContain('ocadm_secret');
  });
});
