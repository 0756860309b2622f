import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { formatReport } from '../../bench/chaos/checker.js';
import { ChaosCluster } from '../../bench/chaos/harness.js';
import { rng, runDefinition } from '../../bench/chaos/schedule.js';
import { useTestDatabase, waitFor } from '../support/db.js';

/**
 * The short, deterministic tier of `npm run chaos`: the same cluster, faults and checker, with
 * three faults fired on conditions instead of a seeded clock: a completion's reply lost after
 * the store committed it, every database connection terminated, and a replica killed with work
 * on its shards. Needs `npm run build` (real server and runner processes).
 */
describe('chaos, short tier: a lost reply, a connection reset, a replica kill', { timeout: 240_000 }, () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-chaos-tier-'));
  let cluster: ChaosCluster | undefined;
  afterAll(async () => {
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses nothing, runs nothing twice, keeps the store consistent, and re-offers a dead replica\'s work', async () => {
    const log: string[] = [];
    cluster = new ChaosCluster({ databaseUrl: db.current.url, dir, replicas: 2, runners: 3, leaseTtlMs: 20_000, pollWindowMs: 5_000, log: (m) => log.push(m) });
    await cluster.start();
    const workload = rng(15);
    const runs: number[] = [];
    for (let i = 0; i < 12; i++) runs.push(await cluster.submit(runDefinition(workload, i, cluster.side)));
    const done = async () => (await cluster!.pool.query(`SELECT count(*)::int AS n FROM steps WHERE status = 'succeeded'`)).rows[0].n as number;

    // A completion's answer is lost after the store committed it: the runner retries, the repeat is answered ok.
    // (The completion rides on the runner's next acquire, or goes alone when no poll leaves for it.)
    const lost = await cluster.loseReply(0, 'complete', 60_000);
    expect(lost).toMatch(/^\/api\/runner\/(complete|acquire)$/);
    await waitFor(() => cluster!.replicas[0].http.dropped.length === 1, { what: 'the completion reply dropped', timeoutMs: 60_000 });

    await waitFor(async () => (await done()) >= 10, { what: 'work under way', timeoutMs: 60_000 });
    expect(await cluster.terminateConnections()).toBeGreaterThan(0);

    // A replica dies; a system-lane probe run on one of its shards measures how soon its work is offered again.
    await waitFor(async () => (await cluster!.pool.query(`SELECT 1 FROM coordination_leases WHERE holder = $1 AND name LIKE 'shard:%' AND expires_at > now()`, [cluster!.replicas[1].id])).rowCount, { what: 'replica 1 owning shards', timeoutMs: 60_000 });
    await cluster.killReplica(1, 1_000);
    expect(cluster.reofferMs).toHaveLength(1);

    expect(await cluster.drain(120_000)).toBe(true);
    const report = await cluster.finish(false);
    const text = formatReport(report, [`faults ${JSON.stringify(cluster.counters.faults)}`]);
    console.log(text);
    expect(report.violations, `${text}\n${log.join('\n')}`).toEqual([]);
    expect(report.steps).toBeGreaterThan(40);
    expect(report.completions).toBeGreaterThanOrEqual(report.steps);
    expect(cluster.counters.faults).toMatchObject({ 'lost-reply:complete': 1, 'pg-terminate': 1, 'replica-kill': 1 });
    // Staleness (15 s) + a coordination tick (5 s) + a dispatch tick, with room for a loaded machine.
    expect(cluster.reofferMs[0]).toBeLessThan(45_000);
  });
});
