import { performance } from 'node:perf_hooks';
import { fleetDemand, fleetWhatIf } from '../src/ops/domain/capacity.js';
import type { OpsContext } from '../src/ops/domain/context.js';
import { migrate } from '../src/store/migrate.js';
import { createPool, type Pool } from '../src/store/pool.js';
import type { BenchEnv } from './opschain.js';
import { prequeue } from './prequeue.js';
import { figure, percentile, type Figure } from './stats.js';

const ENTRIES = 10_000;
const RUNNERS = 500;
const GROUPS = 5;
const REPEATS = 7;
const TARGET_DEMAND_MS = 150;
const TARGET_WHAT_IF_MS = 500;

/**
 * 500 runners in 5 groups registered in one statement (the shape of test/support/fleet.ts
 * insertRunner), max_load 4, every other runner busy with one load-4 lease, 50 drained, 25
 * offline; 10,000 ready entries: 1,800 per group and 1,000 for a label no runner has.
 */
export async function seedEstate(pool: Pool, env: BenchEnv): Promise<void> {
  await pool.query(
    `INSERT INTO runners (id, name, group_name, labels, executors, max_load, credential_hash, state, drained)
     SELECT 'rnr_cap_' || g, 'cap-' || g, 'g' || (g % ${GROUPS}), '{linux}', '{shell}', 4, md5('cap-' || g),
            CASE WHEN g % 20 = 7 THEN 'offline' ELSE 'online' END, g % 10 = 3
       FROM generate_series(0, ${RUNNERS - 1}) g`,
  );
  await pool.query(
    `INSERT INTO step_leases (step_id, run_id, shard, attempt, load, ready_at, enqueued_at, position, holder, runner_id, delivered_at, expires_at, executing)
     SELECT 50000000 + g, 50000000 + g, 0, 1, 4, now(), now(), g, 'bench', 'rnr_cap_' || g, now(), now() + interval '3 minutes', g % 4 = 0
       FROM generate_series(0, ${RUNNERS - 1}, 2) g`,
  );
  const perGroup = (ENTRIES - 1_000) / GROUPS;
  for (let g = 0; g < GROUPS; g++) await prequeue(pool, { entries: perGroup, stepsPerRun: 10, label: `capacity-g${g}`, requirement: { group: `g${g}`, labels: ['linux'] }, progress: env.progress });
  await prequeue(pool, { entries: 1_000, stepsPerRun: 10, label: 'capacity-gpu', requirement: { labels: ['gpu'] }, progress: env.progress });
}

async function timed(fn: () => Promise<unknown>): Promise<number[]> {
  const samples: number[] = [];
  for (let i = 0; i <= REPEATS; i++) {
    const t0 = performance.now();
    await fn();
    if (i > 0) samples.push(performance.now() - t0);
  }
  return samples;
}

/**
 * `fleet demand` and `fleet what-if` on 10,000 ready entries over 500 runners: the domain call
 * each verb makes (one REPEATABLE READ snapshot, the planned tick, the verdicts, the view), p50
 * of 7 after one warm-up.
 */
export async function capacityFigures(env: BenchEnv): Promise<Figure[]> {
  const db = await env.dbs.create('capacity');
  const pool = createPool(db.url, { max: 4, applicationName: 'opschain-bench', statementTimeoutMs: 600_000, queryTimeoutMs: 600_000 });
  try {
    await migrate(pool);
    env.progress(`capacity: ${RUNNERS} runners and ${ENTRIES.toLocaleString('en-US')} ready entries`);
    await seedEstate(pool, env);
    const ctx: OpsContext = { pool, actor: 'bench', source: 'bench', acceptExceeding: true };
    let capacity = 0;
    const demand = await timed(async () => (capacity = (await fleetDemand(ctx, {})).total.capacity));
    let starts = 0;
    const whatIf = await timed(async () => (starts = (await fleetWhatIf(ctx, { drainGroup: 'g1', undrain: 'cap-3', addRunners: 50, group: 'g2', label: 'linux' })).starts.length));
    const d = figure({ scenario: 'capacity', metric: `fleet demand (ms) at ${ENTRIES.toLocaleString('en-US')} entries over ${RUNNERS} runners (p50 of ${REPEATS})`, value: percentile(demand, 50), unit: 'ms', better: 'lower', target: `≤ ${TARGET_DEMAND_MS} ms`, note: `max ${Math.round(Math.max(...demand))} ms; ${capacity} capacity-bound` });
    d.met = d.value <= TARGET_DEMAND_MS;
    const w = figure({ scenario: 'capacity', metric: `fleet what-if (ms) at ${ENTRIES.toLocaleString('en-US')} entries over ${RUNNERS} runners (p50 of ${REPEATS})`, value: percentile(whatIf, 50), unit: 'ms', better: 'lower', target: `≤ ${TARGET_WHAT_IF_MS} ms`, note: `max ${Math.round(Math.max(...whatIf))} ms; drain a group, undrain a runner, add 50 runners: ${starts} would start` });
    w.met = w.value <= TARGET_WHAT_IF_MS;
    return [d, w];
  } finally {
    await pool.end().catch(() => {});
  }
}
