import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { BIN } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';

/** Processes whose command line names `--pid=PID`: the pipe watchdog of that process. */
function watchdogsOf(pid: number): string[] {
  const found: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmd.includes(`--pid=${pid}`)) found.push(cmd);
    } catch {
      // the process ended while we looked
    }
  }
  return found;
}

/**
 * `opschain ARGS | head -1` through a shell, so stdout is a real pipe as at a prompt: ms from
 * the line reaching head to the watch's exit, its exit code and pid.
 */
async function pipedToHead(args: string[], env: NodeJS.ProcessEnv): Promise<{ line: string; afterLineMs: number; code: number; pid: number }> {
  const script = '{ "$0" "$@" & echo "pid $!" >&2; wait $!; echo "code $?" >&2; } | head -1';
  const sh = spawn('bash', ['-c', script, process.execPath, BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const killer = setTimeout(() => sh.kill('SIGKILL'), 60_000);
  try {
    let line = '';
    let lineAt = 0;
    let err = '';
    sh.stdout.on('data', (d) => ((line += d), (lineAt ||= Date.now())));
    sh.stderr.on('data', (d) => (err += d));
    await new Promise<void>((resolve) => sh.on('close', () => resolve()));
    const pid = Number(/pid (\d+)/.exec(err)?.[1]);
    const code = Number(/code (\d+)/.exec(err)?.[1]);
    return { line, afterLineMs: Date.now() - lineAt, code, pid };
  } finally {
    clearTimeout(killer);
  }
}

describe('a --watch piped into head', () => {
  const db = useTestDatabase();

  it('admin queue --watch ends as soon as head has its line, not a refresh (30 s) later, and leaves nothing behind', async () => {
    const r = await pipedToHead(['admin', 'queue', '--watch', '--interval', '30'], { OPSCHAIN_DATABASE_URL: db.current.url });
    expect(JSON.parse(r.line)).toHaveProperty('postures');
    expect(r.code).toBe(0);
    // Without the watchdog the next write, 30 s on, would be the first to see the closed pipe.
    expect(r.afterLineMs).toBeLessThan(15_000);
    await waitFor(() => watchdogsOf(r.pid).length === 0, { what: 'the watchdog to end with the watch' });
  });

  it('fleet demand --watch (piped: NDJSON every 2 s) ends with head, exit 0, and leaves nothing behind', async () => {
    const r = await pipedToHead(['fleet', 'demand', '--watch'], { OPSCHAIN_DATABASE_URL: db.current.url });
    expect(JSON.parse(r.line)).toHaveProperty('groups');
    expect(r.code).toBe(0);
    await waitFor(() => watchdogsOf(r.pid).length === 0, { what: 'the watchdog to end with the watch' });
  });
});
