import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { readServerRecord } from '../src/home.js';
import { createPool } from '../src/store/pool.js';
import { tokenCreate } from '../src/store/tokens.js';
import { withDatabase } from './pg.js';
import { runCleanups, ServerProcess } from './procs.js';
import { SimFleet } from './sim-fleet.js';

/**
 * What an idle fleet costs one replica: N simulated runners register against a real
 * `opschain server start` on a fresh database, then all park at once and long-poll an empty
 * queue. Prints the runner rows the store read while they registered and while they parked
 * (pg_stat_user_tables), and over the measured window the server's CPU (from /proc) and the
 * store's committed transactions per second (pg_stat_database.xact_commit of that database, the
 * bench's own two reads included).
 *
 *   npm run build && node dist/bench/idle-fleet.js --database-url postgres://postgres@127.0.0.1:5432/postgres \
 *     --runners 500 --wait-ms 1000 --seconds 20
 */
const { values } = parseArgs({
  options: {
    'database-url': { type: 'string', default: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    runners: { type: 'string', default: '500' },
    'wait-ms': { type: 'string', default: '1000' },
    seconds: { type: 'string', default: '20' },
    'warm-up-seconds': { type: 'string', default: '5' },
  },
});
const runners = Number(values.runners);
const waitMs = Number(values['wait-ms']);
const seconds = Number(values.seconds);

async function main(): Promise<void> {
  const admin = createPool(values['database-url']!, { max: 1, applicationName: 'opschain-bench' });
  const name = `idle_fleet_${Date.now()}`;
  await admin.query(`CREATE DATABASE ${name}`);
  const url = withDatabase(values['database-url']!, name);
  const home = mkdtempSync(join(tmpdir(), 'opschain-idle-fleet-'));
  const server = new ServerProcess({ databaseUrl: url, home });
  const pool = createPool(url, { max: 1, applicationName: 'opschain-bench' });
  let fleet: SimFleet | undefined;
  try {
    await server.ready(async () => readServerRecord(home)?.url);
    const { secret } = await tokenCreate(pool, { kind: 'registration', name: 'idle-fleet' });
    fleet = new SimFleet({ urls: [server.url], registrationToken: secret, runners, slots: 1, waitMs });
    const commits = async () => Number((await pool.query(`SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`)).rows[0].xact_commit);
    // Runner rows the store handed out (ticks' parked-runner reads, credential reads, registrations'
    // name lookups): backends report their table statistics up to a second late, so wait that first.
    const runnerRowsRead = async () => {
      await new Promise((r) => setTimeout(r, 1_100));
      const { rows } = await pool.query(`SELECT coalesce(idx_tup_fetch, 0) AS idx, coalesce(seq_tup_read, 0) AS seq FROM pg_stat_user_tables WHERE relname = 'runners'`);
      return { byIndex: Number(rows[0].idx), byScan: Number(rows[0].seq) };
    };
    const rows0 = await runnerRowsRead();
    const t0 = performance.now();
    const cpu0 = server.cpuMs()!;
    await fleet.register();
    const registerS = (performance.now() - t0) / 1000;
    const registerCpu = server.cpuMs()! - cpu0;
    const rowsRegistered = await runnerRowsRead();
    const cpuP = server.cpuMs()!;
    // Then the whole fleet parks at once, as after a replica restart.
    fleet.start();
    await new Promise((r) => setTimeout(r, Number(values['warm-up-seconds']) * 1000));
    const rows1 = await runnerRowsRead();
    const cpuParked = server.cpuMs()! - cpuP;
    const [c0, cpuA, a0, at0] = [await commits(), server.cpuMs()!, fleet.counters.acquires, performance.now()];
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const [c1, cpuB, a1, at1] = [await commits(), server.cpuMs()!, fleet.counters.acquires, performance.now()];
    const s = (at1 - at0) / 1000;
    const figures = {
      runners,
      waitMs,
      registerSeconds: +registerS.toFixed(2),
      registerCpuPctOfCore: +((registerCpu / 1000 / registerS) * 100).toFixed(1),
      runnerRowsReadRegistering: rowsRegistered.byIndex + rowsRegistered.byScan - rows0.byIndex - rows0.byScan,
      runnerRowsReadParking: rows1.byIndex + rows1.byScan - rowsRegistered.byIndex - rowsRegistered.byScan,
      parkingCpuMs: cpuParked,
      idleCpuPctOfCore: +(((cpuB - cpuA) / 1000 / s) * 100).toFixed(1),
      storeCommitsPerSecond: +((c1 - c0) / s).toFixed(1),
      acquiresPerSecond: +((a1 - a0) / s).toFixed(1),
      errors: fleet.counters.errors,
      serverErrorLines: server.errorLines().length,
    };
    console.log(JSON.stringify(figures));
  } finally {
    await fleet?.stop();
    await server.stop();
    await pool.end();
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await admin.end();
    rmSync(home, { recursive: true, force: true });
    await runCleanups();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
