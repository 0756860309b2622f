import type { Deployment, BenchEnv } from './opschain.js';
import { figure, percentile, type Figure } from './stats.js';
import { oneShotAdd, templatePut } from '../src/ops/domain/trigger-definitions.js';
import type { Pool } from '../src/store/pool.js';

const TEMPLATE = 'name: bench-trigger\nsteps:\n  noop:\n    run: "true"\n';

async function firedLateness(pool: Pool, ids: number[], timeoutMs: number): Promise<Map<number, { sinceDue: number; sinceWritten: number }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await pool.query(
      `SELECT o.id, extract(epoch FROM t.fired_at - o.fire_at) * 1000 AS since_due, extract(epoch FROM t.fired_at - o.created_at) * 1000 AS since_written
         FROM one_shots o JOIN trigger_ticks t ON t.trigger_id = o.id AND t.outcome = 'fired' WHERE o.id = ANY($1::bigint[])`,
      [ids],
    );
    if (rows.length === ids.length) return new Map(rows.map((r) => [Number(r.id), { sinceDue: Number(r.since_due), sinceWritten: Number(r.since_written) }]));
    if (Date.now() > deadline) throw new Error(`triggers: ${ids.length - rows.length} one-shot(s) not fired within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * The launch loop of a real server process (the leader of one replica): how late a one-shot
 * with a known due time fires (fired_at − fire_at, both the database's clock; ADR-0056: "on the
 * dot", the issue: within 50 ms on an idle machine), and how soon one written for "now" through
 * another connection fires (fired_at − created_at; at most the 2 s probe interval, usually the
 * NOTIFY wakes it at once).
 */
export async function triggerFigures(env: BenchEnv, deploy: (label: string, replicas: number) => Promise<Deployment>): Promise<Figure[]> {
  const n = env.args.quick ? 10 : 40;
  const spacingMs = 250;
  const d = await deploy('triggers', 1);
  try {
    await templatePut(d.pool, { text: TEMPLATE, actor: 'bench' });
    // One first, so the leader is elected and its statements are warm.
    const warm = await oneShotAdd(d.pool, { template: 'bench-trigger', at: 'now', actor: 'bench' });
    await firedLateness(d.pool, [warm.id], 30_000);
    env.progress(`triggers: ${n} one-shots due ${spacingMs} ms apart, then ${n} written for now`);
    const known: number[] = [];
    for (let i = 0; i < n; i++) known.push((await oneShotAdd(d.pool, { template: 'bench-trigger', at: `+${1_000 + i * spacingMs}ms`, actor: 'bench' })).id);
    const dueLate = [...(await firedLateness(d.pool, known, 60_000)).values()].map((v) => v.sinceDue);
    const written: number[] = [];
    for (let i = 0; i < n; i++) {
      written.push((await oneShotAdd(d.pool, { template: 'bench-trigger', at: 'now', actor: 'bench' })).id);
      await new Promise((r) => setTimeout(r, spacingMs));
    }
    const newLate = [...(await firedLateness(d.pool, written, 60_000)).values()].map((v) => v.sinceWritten);
    const dueP50 = figure({ scenario: 'triggers', metric: `known due time → fired p50 (${n} one-shots, loop idle)`, value: percentile(dueLate, 50), unit: 'ms', better: 'lower', target: '≤ 50 ms' });
    dueP50.met = dueP50.value <= 50;
    const dueMax = figure({ scenario: 'triggers', metric: 'known due time → fired max', value: Math.max(...dueLate), unit: 'ms', better: 'lower' });
    const newP50 = figure({ scenario: 'triggers', metric: `one-shot for now written → fired p50 (${n}, another connection)`, value: percentile(newLate, 50), unit: 'ms', better: 'lower' });
    const newMax = figure({ scenario: 'triggers', metric: 'one-shot for now written → fired max', value: Math.max(...newLate), unit: 'ms', better: 'lower', target: '≤ 2000 ms' });
    newMax.met = newMax.value <= 2_000;
    return [dueP50, dueMax, newP50, newMax];
  } finally {
    await d.stop();
  }
}
