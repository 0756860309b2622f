import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createPool } from '../../src/store/pool.js';
import { CliProcess } from '../support/cli.js';
import { waitFor } from '../support/db.js';
import { PgPair, pgBinaries } from '../support/pg-pair.js';
import { freePort } from '../../bench/procs.js';

const bins = pgBinaries();
if ('missing' in bins) console.warn(`\n!!! SKIPPED: the standby start-up test: ${bins.missing}\n`);

/** A server pointed at a standby says so and waits, with no exit and restart, and goes on once it is promoted. Needs `npm run build`. */
describe.skipIf('missing' in bins)('a server started against a standby', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'opschain-standby-start-'));
  let pair: PgPair | undefined;
  let server: CliProcess | undefined;
  afterAll(async () => {
    await server?.stop();
    await pair?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says the store is a standby and waits, then starts once it is promoted', async () => {
    pair = await PgPair.start((bins as { dir: string }).dir, { database: 'opschain_standby' });
    const port = await freePort();
    server = new CliProcess(['server', 'start', '--database-url', pair.standbyUrl, '--port', String(port), '--home', dir, '--log-level', 'info'], { OPSCHAIN_HOME: dir, OPSCHAIN_DATABASE_URL: '', DATABASE_URL: '' });
    await server.waitForOutput(/the store is a standby \(read-only, in recovery\): waiting/, 60_000);
    // Waiting, not failing: still running, not serving, and no migration was tried on the standby.
    const poke = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status, () => 'refused');
    expect(poke).toBe('refused');
    expect(server.child.exitCode).toBeNull();
    expect(server.output).not.toMatch(/read-only transaction|"level":(50|60)/);
    // It keeps looking: its probe asks the standby again and again (three distinct checks seen).
    const standby = createPool(pair.standbyUrl, { max: 1 });
    try {
      const checks = new Set<number>();
      await waitFor(async () => {
        const { rows } = await standby.query(`SELECT query_start FROM pg_stat_activity WHERE application_name = 'opschain-probe' AND query LIKE '%pg_is_in_recovery%'`);
        for (const r of rows) checks.add(r.query_start.getTime());
        return checks.size >= 3;
      }, { what: 'the server checking the standby again', timeoutMs: 30_000, intervalMs: 100 });
    } finally {
      await standby.end();
    }
    expect(server.child.exitCode).toBeNull();
    await pair.promote();
    await server.waitForOutput(/opschain server ready/, 60_000);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(200);
    expect(server.output.match(/the store is a standby/g)).toHaveLength(1);
  });
});
