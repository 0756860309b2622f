import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { Fleet } from './e2e-support.js';
import { alive } from './process-state.js';

// The default lease TTL (3 min) and so the default renewal cadence (60 s): a cancel must reach the
// runner without waiting for its next renewal.
describe('runs cancel reaches the runner at once', { timeout: 120_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet;
  beforeAll(async () => {
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 180_000, pollWindowMs: 50_000 });
  });
  afterAll(async () => {
    await fleet?.stopAll();
    fleet?.cleanup();
  });

  it('a running sleep 300 is killed within seconds of `runs cancel`, and the run ends cancelled', async () => {
    const runner = fleet.runner('cancel-now');
    await fleet.ready(runner);
    const runId = await fleet.submit({ name: 'cancel-now', steps: { slow: { run: `echo $$ > ${fleet.path('slow.pid')}; exec sleep 300` } } });
    const pid = await fleet.pidFrom('slow.pid');
    // Past the first renewal window a cancel that waits for a renewal would not be seen for a minute.
    await runner.waitForOutput(/step slow of run \d+ started/);
    const cancelledAt = Date.now();
    const r = await runCli(['runs', 'cancel', String(runId), '--database-url', db.current.url]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^run ${runId} cancelled: slow`));
    expect(r.stdout).toMatch(/1 running step: its lease revoked; its runner is told now and kills the step's process group/);
    // Seconds when the machine is idle; the bound leaves room for a loaded one (the CLI's own start
    // is inside it) and still fails a cancel that waits for the renewal, 60 s after the start.
    await waitFor(() => !alive(pid), { what: 'the step process gone', timeoutMs: 40_000 });
    expect(Date.now() - cancelledAt).toBeLessThan(40_000);
    expect(await fleet.runDone(runId, 5_000)).toMatchObject({ status: 'cancelled' });
    await runner.waitForOutput(/lease expired or revoked \(on cancel notice\)/);
    expect(runner.running).toBe(true);
    await runner.stop('SIGTERM');
  });
});
