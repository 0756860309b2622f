import { writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { useTestDatabase } from '../support/db.js';
import { Fleet } from '../runner/e2e-support.js';

describe('runs submit --wait --timeout and runs retry --wait', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  const cli = (...args: string[]) => runCli([...args, '--database-url', db.current.url]);
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer();
    await fleet.ready(fleet.runner('waiter'));
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('a run no runner can take: --timeout gives up with exit 6, naming the run, which goes on', async () => {
    const file = fleet.path('stuck.yaml');
    writeFileSync(file, 'name: stuck\nplacement: { labels: [nowhere] }\nsteps:\n  one: { run: "true" }\n');
    const started = Date.now();
    const r = await cli('runs', 'submit', file, '--wait', '--timeout', '2s');
    expect(r.code).toBe(6);
    expect(Date.now() - started).toBeLessThan(30_000);
    const id = Number(r.stdout.trim());
    expect(r.stderr.trim().split('\n').at(-1)).toBe(`Error: run ${id} still running after 2s; it goes on ('opschain runs cancel ${id}' stops it)`);
    expect((await db.current.pool.query('SELECT status FROM runs WHERE id = $1', [id])).rows[0].status).toBe('running');
    // Its only step waits in the queue: it reads queued, not running.
    const shown = await cli('runs', 'show', String(id));
    expect(shown.stdout).toMatch(new RegExp(`^run ${id} stuck \\(default\\): queued after`));
    expect(JSON.parse((await cli('runs', 'show', String(id), '--json')).stdout).status).toBe('running');
    const bad = await cli('runs', 'submit', file, '--timeout', '2s');
    expect(bad.code).toBe(2);
  });

  it('retry --wait follows the retried run to its end: exit 0 when it succeeds', async () => {
    const marker = fleet.path('second-time');
    const file = fleet.path('flaky.yaml');
    writeFileSync(file, `name: flaky\nsteps:\n  one: { run: "test -f ${marker} || { touch ${marker}; exit 3; }" }\n`);
    const first = await cli('runs', 'submit', file, '--wait');
    expect(first.code).toBe(1);
    const id = Number(first.stdout.trim());
    const retried = await cli('runs', 'retry', String(id), '--wait', '--timeout', '60s');
    expect(retried.code).toBe(0);
    expect(retried.stdout).toMatch(new RegExp(`^run ${id} running again: one \\(attempt 2\\)`));
    expect(retried.stderr).toMatch(new RegExp(`run ${id} flaky \\(default\\): succeeded`));
    const again = await cli('runs', 'retry', String(id), '--wait');
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/nothing to retry \(succeeded\)/);
  });
});
