import { performance } from 'node:perf_hooks';
import { runSubmitMany } from '../src/orchestrator/submit.js';
import { benchDagRunFile, type BenchEnv, type Deployment } from './opschain.js';
import type { FleetOptions, SimFleet } from './sim-fleet.js';
import { figure, percentile, round, type Figure } from './stats.js';

export const CHAIN_STEPS = 20;

/** Hop times of one round of chains: step done (its completion sent) → the step that needs it offered. */
async function chainRound(d: Deployment, fleet: SimFleet, track: HopTracker, runs: number, label: string, limitMs: number): Promise<number[]> {
  const before = fleet.counters.completed;
  track.start();
  await runSubmitMany(d.pool, Array.from({ length: runs }, (_, i) => benchDagRunFile(`${label}-${i}`, `proj-${i % 4}`, 'chain', CHAIN_STEPS)), { actor: 'bench' });
  await fleet.until((c) => c.completed >= before + runs * CHAIN_STEPS, limitMs, `${runs} chains of ${CHAIN_STEPS} completed`);
  return track.take();
}

/**
 * Pairs, from the runner's side, each step's completion with the offer of the step that needs
 * it: run R's step s(i) is offered after s(i-1)'s completion was sent. Same process, same clock.
 */
class HopTracker {
  private readonly stepOf = new Map<number, { run: number; step: string }>();
  private readonly doneAt = new Map<string, number>();
  private readonly pending = new Map<string, number>();
  private hops: number[] = [];

  start(): void {
    this.hops = [];
  }

  take(): number[] {
    const out = this.hops;
    this.hops = [];
    return out;
  }

  offered(offer: { step_id: number; run_id: number; step: string }, at: number): void {
    const run = Number(offer.run_id);
    this.stepOf.set(Number(offer.step_id), { run, step: offer.step });
    const i = Number(offer.step.slice(1));
    if (i === 0) return;
    const key = `${run}:s${i - 1}`;
    const done = this.doneAt.get(key);
    // An offer can arrive before the bench has seen its predecessor's send time only if the
    // send was on another call that had not yet returned; park it until the send is recorded.
    if (done === undefined) this.pending.set(key, at);
    else this.hops.push(at - done);
    this.doneAt.delete(key);
  }

  completeSent(stepIds: number[], at: number): void {
    for (const id of stepIds) {
      const s = this.stepOf.get(id);
      if (!s) continue;
      this.stepOf.delete(id);
      const key = `${s.run}:${s.step}`;
      const early = this.pending.get(key);
      if (early !== undefined) {
        this.pending.delete(key);
        this.hops.push(early - at);
      } else this.doneAt.set(key, at);
    }
  }
}

/** The hops of `rounds` rounds of `runs` chains over `runners` simulated runners of one offer each, in the bench's clock and the store's. */
async function chainHops(env: BenchEnv, d: Deployment, fleetOf: FleetOf, p: { runs: number; runners: number; rounds: number; label: string; limitMs: number }): Promise<{ hops: number[]; inStore: number[]; msPerRound: number; cycle: string }> {
  const track = new HopTracker();
  const fleet = fleetOf(d, p.runners, 1, { namePrefix: p.label, onOffer: (o, at) => track.offered(o, at), onCompleteSent: (ids, at) => track.completeSent(ids, at) });
  try {
    await fleet.register();
    fleet.start();
    await fleet.until((c) => c.parked >= p.runners, 60_000, 'every runner parked');
    env.progress(`chain: warm-up, ${p.runs} chains of ${CHAIN_STEPS} drained untimed over ${p.runners} runners`);
    await chainRound(d, fleet, track, p.runs, `${p.label}warm`, p.limitMs);
    env.progress(`chain: ${p.rounds} rounds of ${p.runs} chains of ${CHAIN_STEPS} steps, ${p.runners} runners parked`);
    const t0 = performance.now();
    const hops: number[] = [];
    for (let r = 0; r < p.rounds; r++) hops.push(...(await chainRound(d, fleet, track, p.runs, `${p.label}-${r}`, p.limitMs)));
    const msPerRound = (performance.now() - t0) / p.rounds;
    // The same hop in the store's clock: the completion's transaction began → the dependent's
    // delivery transaction began. What is left of the hop is HTTP, the runner and the commits.
    const { rows } = await d.pool.query(
      `SELECT extract(epoch FROM n.started_at - p.finished_at)::float8 * 1000 AS ms
         FROM steps n JOIN runs r ON r.id = n.run_id AND r.name LIKE $1
         JOIN steps p ON p.run_id = n.run_id AND p.name = 's' || (substr(n.name, 2)::int - 1)
        WHERE n.name <> 's0'`,
      [`${p.label}-%`],
    );
    return { hops, inStore: rows.map((r) => Number(r.ms)), msPerRound, cycle: fleet.cycleSummary() };
  } finally {
    await fleet.stop();
  }
}

type FleetOf = (d: Deployment, runners: number, slots: number, extra: Partial<FleetOptions>) => SimFleet;

/**
 * Chains of 20 steps (each needs the one before) drained by parked runners, more runners than
 * chains, so every hop is the dispatch plane's alone: the completion commits, the step it
 * released is enqueued and handed to a parked acquire. A round of the same shape is drained
 * untimed first (code compiled, statements prepared). Then the same chains over as many runners
 * as chains: a runner's next acquire carries its completion, and no other runner is parked to
 * take the dependent, so the hop is the hand-off to that acquire itself (or a tick, without it).
 */
export async function chainFigures(env: BenchEnv, deploy: (label: string, replicas: number) => Promise<Deployment>, fleetOf: FleetOf): Promise<Figure[]> {
  // A few chains at once, so a hop measures the path and not a queue of hops waiting their turn;
  // rounds of them for samples.
  const runs = 4;
  const rounds = env.args.quick ? 2 : 8;
  const limitMs = env.args.quick ? 90_000 : 600_000;
  const d = await deploy('chain', 1);
  try {
    const spare = await chainHops(env, d, fleetOf, { runs, runners: runs + 4, rounds, label: 'chain', limitMs });
    const own = await chainHops(env, d, fleetOf, { runs, runners: runs, rounds, label: 'chainone', limitMs });
    const expected = rounds * runs * (CHAIN_STEPS - 1);
    const inStore = (h: { inStore: number[] }) => `in the store's clock (completion transaction began → dependent's delivery transaction began): p50 ${round(percentile(h.inStore, 50), 3)} ms, p99 ${round(percentile(h.inStore, 99), 3)} ms`;
    const p50 = figure({ scenario: 'chain', metric: `step done→dependent offered p50 (ms), chains of ${CHAIN_STEPS}`, value: percentile(spare.hops, 50), unit: 'ms', better: 'lower', target: '≤ 5' });
    p50.met = p50.value <= 5;
    p50.note = `${spare.hops.length} of ${expected} hops paired; ${rounds} rounds of ${runs} chains at once, ${runs + 4} runners; ${round(spare.msPerRound / 1000, 3)} s a round; ${inStore(spare)}`;
    const p99 = figure({ scenario: 'chain', metric: 'step done→dependent offered p99 (ms)', value: percentile(spare.hops, 99), unit: 'ms', better: 'lower', target: '≤ 20' });
    p99.met = p99.value <= 20;
    p99.note = spare.cycle;
    const max = figure({ scenario: 'chain', metric: 'step done→dependent offered max (ms)', value: Math.max(...spare.hops), unit: 'ms', better: 'lower' });
    const one = figure({ scenario: 'chain', metric: 'step done→dependent offered p50 (ms), one runner per chain', value: percentile(own.hops, 50), unit: 'ms', better: 'lower' });
    one.note = `${own.hops.length} of ${expected} hops paired; ${runs} runners; p99 ${round(percentile(own.hops, 99), 3)} ms; ${round(own.msPerRound / 1000, 3)} s a round; ${inStore(own)}; ${own.cycle}`;
    return [p50, p99, max, one];
  } finally {
    await d.stop();
  }
}
