import { writeFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { withHostPort } from '../support/urls.js';
import { Fleet } from './e2e-support.js';

describe('a runner rides out a store outage shorter than the lease TTL', { timeout: 150_000 }, () => {
  const db = useTestDatabase();
  let fleet: Fleet | undefined;
  let proxy: TcpProxy | undefined;
  afterAll(async () => {
    await fleet?.stopAll();
    await proxy?.stop();
    fleet?.cleanup();
  });

  it('renewals and the completion answered 503 are retried; the step completes once, as attempt 1', async () => {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const port = await proxy.start();
    fleet = new Fleet(db.current.pool, db.current.url);
    await fleet.startServer({ leaseTtlMs: 30_000, databaseUrl: withHostPort(db.current.url, '127.0.0.1', port) });
    const runner = fleet.runner('outage');
    await fleet.ready(runner);
    const go = fleet.path('outage.go');
    const side = fleet.path('outage.side');
    const runId = await fleet.submit({
      name: 'outage',
      env: { SIDE: side },
      steps: { wait: { run: `echo started | tee -a "$SIDE"; while [ ! -e ${go} ]; do sleep 0.05; done; echo finished >> "$SIDE"` } },
    });
    // The step's first output is in the store before the outage begins.
    await waitFor(async () => (await db.current.pool.query(`SELECT 1 FROM step_logs WHERE chunk = 'started\n'`)).rowCount, { what: 'first log batch', timeoutMs: 60_000 });

    proxy.refuse();
    await runner.waitForOutput(/renew on \S+ failed \(HTTP 503: store unavailable/, 60_000);
    writeFileSync(go, '');
    // The result rides the poll for the freed slot (complete-and-acquire): that call is what gets the 503.
    await runner.waitForOutput(/(complete|acquire) on \S+ failed \(HTTP 503: store unavailable/, 60_000);
    proxy.heal();

    expect(await fleet.runDone(runId, 90_000)).toMatchObject({ status: 'succeeded' });
    expect(fleet.lines('outage.side')).toEqual(['started', 'finished']);
    expect((await fleet.steps(runId)).wait).toMatchObject({ status: 'succeeded', attempt: 1, exit_code: 0 });
    const log = await db.current.pool.query(`SELECT string_agg(chunk, '' ORDER BY id) AS text FROM step_logs WHERE stream = 'stdout'`);
    expect(log.rows[0].text).toBe('started\n');
  });
});
