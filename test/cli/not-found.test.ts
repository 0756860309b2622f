import { spawn } from 'node:child_process';
import { beforeEach, describe, expect, it } from 'vitest';
import { BIN, runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { insertRunner } from '../support/fleet.js';

/** The binary under a pseudo-terminal (util-linux `script`), Enter typed at once: what an operator's terminal does. */
function inTerminal(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const command = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
    const child = spawn('script', ['-qec', command, '/dev/null'], { env: { ...process.env, NO_COLOR: '1' }, stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
    child.stdin.write('\n');
  });
}

describe('a mistyped verb', () => {
  const db = useTestDatabase();
  beforeEach(async () => {
    await db.current.pool.query('DELETE FROM runners');
    await insertRunner(db.current.pool, { id: 'rnr_typo', name: 'r1' });
  });
  const drained = async () => (await db.current.pool.query(`SELECT drained FROM runners WHERE id = 'rnr_typo'`)).rows[0].drained;

  it('in a pipe: names the closest verb, runs nothing, exits 2', async () => {
    const r = await runCli(['fleet', 'drian', 'r1', '--database-url', db.current.url]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toEqual(["Error: 'fleet drian' is not an opschain command. Did you mean 'fleet drain'?", "See 'opschain fleet --help' for the list."]);
    expect(r.stdout).toBe('');
    expect(await drained()).toBe(false);
  });

  it('in a terminal, Enter pulls no lever: no prompt, the suggestion, exit 2', async () => {
    const r = await inTerminal(['fleet', 'drian', 'r1', '--database-url', db.current.url]);
    expect(r.code).toBe(2);
    expect(r.output).toMatch(/Did you mean 'fleet drain'\?/);
    expect(r.output).not.toMatch(/\(Y\/n\)/);
    expect(await drained()).toBe(false);
    expect((await db.current.pool.query(`SELECT count(*)::int AS n FROM audit_log`)).rows[0].n).toBe(0);
  });

  it('a mistyped topic is suggested too, and nothing close suggests nothing', async () => {
    const topic = await runCli(['flet', 'drain', 'r1']);
    expect(topic.code).toBe(2);
    expect(topic.stderr).toMatch(/^Error: 'flet drain' is not an opschain command\. Did you mean 'fleet drain'\?/);
    const far = await runCli(['zzzzzzzz']);
    expect(far.code).toBe(2);
    expect(far.stderr.trim().split('\n')).toEqual(["Error: 'zzzzzzzz' is not an opschain command.", "See 'opschain --help' for the list."]);
  });
});
