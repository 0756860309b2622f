import { performance } from 'node:perf_hooks';
import { runSubmit } from '../src/orchestrator/submit.js';
import { queueNotify } from '../src/store/queue.js';
import type { Sizes } from './args.js';
import { openFileLimit, openFilesProblem } from './fd-limit.js';
import { benchRunFile, type BenchEnv, type Deployment } from './opschain.js';
import { paced } from './pace.js';
import { costDelta, costSnapshot, statsReset, topStatements } from './pg.js';
import { prequeue } from './prequeue.js';
import type { FleetOptions, SimFleet } from './sim-fleet.js';
import { figure, percentile, round, type Figure } from './stats.js';

const MIB = 1024 * 1024;
/** Runners in the small fleet that submit→offer with the large one parked is compared against. */
const SMALL_FLEET = 64;

type Deploy = (label: string, replicas: number) => Promise<Deployment>;
type FleetOf = (d: Deployment, runners: number, slots: number, extra: Partial<FleetOptions>) => SimFleet;

const n = (v: number) => v.toLocaleString('en-US');

/** A figure with a ceiling: met when the value is at most `max`. */
function capped(metric: string, value: number, unit: string, max: number, target: string, note?: string): Figure {
  const f = figure({ scenario: 'fleet', metric, value, unit, better: 'lower', target, note });
  f.met = Number.isFinite(value) && value <= max;
  return f;
}

/** Acquires parked on the server now, as its /metrics says (the fleet's own count includes those still in flight). */
async function serverParked(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return Number(/^opschain_acquires_parked (\S+)$/m.exec(text)?.[1] ?? NaN);
}

/**
 * Waits until the server holds `count` parked acquires; polls /metrics twice a second (never
 * during a sample). Answers how many were parked when it gave up after `timeoutMs`, or null.
 */
async function untilServerParked(d: Deployment, count: number, timeoutMs: number): Promise<number | null> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const parked = await serverParked(d.urls[0]).catch(() => 0);
    if (parked >= count) return null;
    if (performance.now() > deadline) return parked;
    await new Promise((r) => setTimeout(r, 500));
  }
}

/**
 * A fleet that did not park in time: a figure of how many did, missed, with the fleet's error
 * kinds, so the figures measured before stay in the run and the rest of the part is skipped.
 */
function notParked(runners: number, parked: number, waitedMs: number, fleet: SimFleet): Figure {
  const f = figure({ scenario: 'fleet', metric: `runners parked within ${round(waitedMs / 1000, 3)} s (of ${n(runners)})`, value: parked, unit: 'runners', better: 'higher', target: `all ${n(runners)}` });
  f.met = false;
  f.note = `${fleet.counters.errors} acquire errors retried; last: ${fleet.lastErrorMessage.slice(0, 200)}`;
  return f;
}

/** Server CPU as % of one core and the store's statements per second over `ms` of wall time. */
async function sample(env: BenchEnv, d: Deployment, ms: number): Promise<{ cpuPct: number | null; statementsPerSec: number | null; top: string }> {
  await statsReset(env.pg, d.db);
  const server = d.servers[0];
  const c0 = await costSnapshot(env.pg, d.db.name);
  const cpu0 = server.cpuMs();
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  const cpu1 = server.cpuMs();
  const wall = performance.now() - t0;
  const c1 = await costSnapshot(env.pg, d.db.name);
  const cost = costDelta(c0, c1);
  const top = await topStatements(env.pg, d.db.name, 5, 'calls');
  return {
    cpuPct: cpu0 === null || cpu1 === null ? null : ((cpu1 - cpu0) / wall) * 100,
    statementsPerSec: cost.calls === null ? null : (cost.calls * 1000) / wall,
    top: top.map((t) => `${round((t.calls * 1000) / wall, 3)}/s ${t.query.slice(0, 60)}`).join(' | '),
  };
}

/** Single-step runs submitted `spacingMs` apart to a fleet that is parked; submit → offer at a runner, in ms. */
async function submitToOffer(d: Deployment, offered: Map<number, number>, fleet: SimFleet, sizes: Sizes, label: string): Promise<number[]> {
  const submitted = new Map<number, number>();
  await paced(sizes.fleetLatencyRuns, sizes.latencySpacingMs, async (i) => {
    const at = performance.now();
    const { runId } = await runSubmit(d.pool, benchRunFile(`${label}-${i}`, 'fleet', 1), { actor: 'bench' });
    submitted.set(runId, at);
  });
  await fleet.until(() => [...submitted.keys()].every((id) => offered.has(id)), 120_000, `an offer for every ${label} run`);
  return [...submitted].map(([id, at]) => offered.get(id)! - at);
}

/**
 * A large fleet against one replica, with real sockets: one keep-alive connection per simulated
 * runner, each runner long-polling as the runner agent does (its default wait, the server's poll
 * window). What the estate costs when nothing happens, how fast it registers, what memory it
 * holds over a deep backlog, whether a submit still reaches a runner as fast as with a small
 * fleet, and what runners parked over a backlog none of them can take cost.
 */
export async function fleetFigures(env: BenchEnv, deploy: Deploy, fleetOf: FleetOf, notes: string[]): Promise<Figure[]> {
  const { sizes } = env;
  const big = sizes.fleetRunners;
  const figures: Figure[] = [];
  // One socket per runner, beside the pools, the server's log pipes and node's own.
  const problem = openFilesProblem(big + 1_024);
  if (problem) throw new Error(`fleet: ${problem}`);
  const limit = openFileLimit();
  if (limit) notes.push(`fleet: open-file limit ${limit.soft} (node raises its soft limit to the hard one, ${limit.hard}, as it starts; the servers inherit it)`);

  // The small fleet first: the baseline for submit→offer, in the same run.
  let smallP50 = NaN;
  {
    const d = await deploy('fleet-small', 1);
    try {
      const offered = new Map<number, number>();
      const fleet = fleetOf(d, SMALL_FLEET, 1, { namePrefix: 'small', waitMs: sizes.fleetWaitMs, onOffer: (o, at) => offered.set(Number(o.run_id), at) });
      await fleet.register();
      fleet.start();
      const short = await untilServerParked(d, SMALL_FLEET, 60_000);
      if (short !== null) throw new Error(`fleet: ${short} of ${SMALL_FLEET} runners parked after 60 s; last error: ${fleet.lastErrorMessage}`);
      env.progress(`fleet: submit→offer with ${SMALL_FLEET} parked (warm-up, then ${sizes.fleetLatencyRuns} runs)`);
      await submitToOffer(d, offered, fleet, sizes, 'small-warm');
      const samples = await submitToOffer(d, offered, fleet, sizes, 'small');
      await fleet.stop();
      smallP50 = percentile(samples, 50);
      figures.push(figure({ scenario: 'fleet', metric: `submit→offer p50 with ${SMALL_FLEET} parked (ms)`, value: smallP50, unit: 'ms', better: 'lower', note: `p99 ${round(percentile(samples, 99), 3)} ms` }));
    } finally {
      await d.stop();
    }
  }

  {
    const d = await deploy('fleet', 1);
    try {
      const offered = new Map<number, number>();
      const fleet = fleetOf(d, big, 1, { namePrefix: 'fleet', waitMs: sizes.fleetWaitMs, onOffer: (o, at) => offered.set(Number(o.run_id), at) });
      env.progress(`fleet: registering ${n(big)} runners, ${sizes.fleetRegisterConcurrency} at a time`);
      const t0 = performance.now();
      const reg = await fleet.register({ concurrency: sizes.fleetRegisterConcurrency });
      const registerS = (performance.now() - t0) / 1000;
      const { rows } = await d.pool.query(`SELECT count(*)::int AS n FROM runners WHERE name LIKE 'fleet-%'`);
      const lost = big - rows[0].n;
      const regNote = `${reg.serverErrors} 5xx, ${reg.throttled} 429, ${reg.transportErrors} transport errors retried; ${lost} lost; ${sizes.fleetRegisterConcurrency} registrations in flight`;
      const regFig = capped(`register ${n(big)} runners (s)`, registerS, 's', 60, '≤ 60, no 5xx, none lost', regNote);
      regFig.met = regFig.met === true && reg.serverErrors === 0 && lost === 0;
      figures.push(regFig);

      // First acquires spread over a while, about 1,000 a second: the sample is of the parked
      // estate, and a stampede of connections is registration's business, measured above.
      const overMs = Math.round(big);
      fleet.start({ overMs });
      const parkT0 = performance.now();
      const short = await untilServerParked(d, big, 300_000 + overMs);
      if (short !== null) {
        figures.push(notParked(big, short, performance.now() - parkT0, fleet));
        await fleet.stop();
        return figures.concat(await backlogPart(env, deploy, fleetOf, notes));
      }
      notes.push(`fleet: ${n(big)} runners parked ${round((performance.now() - parkT0) / 1000, 3)} s after their loops started (first acquires spread over ${overMs / 1000} s); wait_ms ${sizes.fleetWaitMs}`);
      // One poll window first, so the sample sees runners in their steady cycle, not the first wave.
      await new Promise((r) => setTimeout(r, Math.min(sizes.fleetWaitMs, 10_000)));
      env.progress(`fleet: ${n(big)} runners parked idle, sampling ${sizes.fleetSampleMs / 1000} s`);
      const polls0 = fleet.counters.acquires;
      const idle = await sample(env, d, sizes.fleetSampleMs);
      const polls = fleet.counters.acquires - polls0;
      notes.push(`fleet idle: ${round((polls * 1000) / sizes.fleetSampleMs, 3)} polls/s; most frequent statements: ${idle.top}`);
      if (idle.cpuPct !== null) figures.push(capped(`server CPU, ${n(big)} runners parked idle (% of a core)`, idle.cpuPct, '%', 10, '≤ 10', `wait_ms ${sizes.fleetWaitMs}, sampled ${sizes.fleetSampleMs / 1000} s`));
      if (idle.statementsPerSec !== null) figures.push(capped(`store statements/s, ${n(big)} runners parked idle`, idle.statementsPerSec, 'calls/s', 50, '≤ 50'));

      env.progress(`fleet: submit→offer with ${n(big)} parked (warm-up, then ${sizes.fleetLatencyRuns} runs)`);
      await submitToOffer(d, offered, fleet, sizes, 'big-warm');
      const samples = await submitToOffer(d, offered, fleet, sizes, 'big');
      const p50 = percentile(samples, 50);
      const lat = capped(`submit→offer p50 with ${n(big)} parked (ms)`, p50, 'ms', 2 * smallP50, `≤ 2× the ${SMALL_FLEET}-runner figure`, `${round(p50 / smallP50, 3)}× the ${SMALL_FLEET}-runner p50 (${round(smallP50, 3)} ms); p99 ${round(percentile(samples, 99), 3)} ms`);
      figures.push(lat);

      env.progress(`fleet: queueing ${n(sizes.fleetReady)} ready entries no runner can take`);
      await prequeue(d.pool, { entries: sizes.fleetReady, stepsPerRun: 50, label: 'fleet-ready', requirement: { labels: ['bench-unplaceable'] }, progress: env.progress });
      await queueNotify(d.pool);
      const server = d.servers[0];
      let rss = 0;
      const until = performance.now() + sizes.memorySampleMs;
      while (performance.now() < until) {
        rss = Math.max(rss, server.memory()?.rss ?? NaN);
        await new Promise((r) => setTimeout(r, 100));
      }
      const parkedAtEnd = fleet.counters.parked;
      await fleet.stop();
      figures.push(capped(`server RSS, ${n(big)} parked + ${n(sizes.fleetReady)} ready (MiB)`, rss / MIB, 'MiB', 400, '≤ 400', `${n(parkedAtEnd)} acquires parked at the end; high-water mark ${round((server.memory()?.hwm ?? NaN) / MIB, 3)} MiB`));
      if (fleet.counters.errors > 0) notes.push(`fleet: ${fleet.counters.errors} acquire errors retried; last: ${fleet.lastErrorMessage}`);
    } finally {
      await d.stop();
    }
  }

  return figures.concat(await backlogPart(env, deploy, fleetOf, notes));
}

/** Runners registering and parking over a backlog none of them can take, on a fresh replica: what they cost once parked. */
async function backlogPart(env: BenchEnv, deploy: Deploy, fleetOf: FleetOf, notes: string[]): Promise<Figure[]> {
  const { sizes } = env;
  const figures: Figure[] = [];
  const d = await deploy('fleet-backlog', 1);
  try {
    const runners = sizes.fleetBacklogRunners;
    env.progress(`fleet: ${n(sizes.fleetBacklog)} entries no runner can take, then ${n(runners)} runners register and park over them`);
    await prequeue(d.pool, { entries: sizes.fleetBacklog, stepsPerRun: 50, label: 'fleet-backlog', requirement: { labels: ['bench-unplaceable'] }, progress: env.progress });
    await queueNotify(d.pool);
    const fleet = fleetOf(d, runners, 1, { namePrefix: 'backlog', waitMs: sizes.fleetWaitMs });
    const server = d.servers[0];
    const cpu0 = server.cpuMs();
    const t0 = performance.now();
    await fleet.register({ concurrency: sizes.fleetRegisterConcurrency });
    fleet.start({ overMs: runners });
    const short = await untilServerParked(d, runners, 300_000 + runners);
    if (short !== null) {
      figures.push(notParked(runners, short, performance.now() - t0, fleet));
      await fleet.stop();
      return figures;
    }
    const arriving = cpu0 === null ? null : ((server.cpuMs()! - cpu0) / (performance.now() - t0)) * 100;
    env.progress(`fleet: ${n(runners)} parked over the backlog, sampling ${sizes.fleetSampleMs / 1000} s`);
    const parked = await sample(env, d, sizes.fleetSampleMs);
    const offersBefore = fleet.counters.offers;
    if (parked.cpuPct !== null) {
      figures.push(
        capped(`server CPU, ${n(runners)} parked over an unplaceable backlog (% of a core)`, parked.cpuPct, '%', 10, '≤ 10', `${n(sizes.fleetBacklog)} entries; while they registered and parked: ${arriving === null ? '—' : round(arriving, 3)}%; statements/s parked: ${parked.statementsPerSec === null ? '—' : round(parked.statementsPerSec, 3)}`),
      );
    }
    notes.push(`fleet backlog: most frequent statements parked: ${parked.top}`);
    figures.push(...(await busyBacklog(env, d, fleetOf, runners, notes)));
    await fleet.stop();
    if (offersBefore > 0) notes.push(`fleet backlog: ${offersBefore} offers made although no runner has the label`);
    if (fleet.counters.offers > offersBefore) notes.push(`fleet backlog: ${fleet.counters.offers - offersBefore} offers made to the parked fleet, which lacks the busy runner's label`);
  } finally {
    await d.stop();
  }
  return figures;
}

/**
 * The same runners parked over a backlog that one registered runner could take but is busy with:
 * the runner with the only matching label holds one of the entries (its lease written straight
 * into the store, acked and executing, as if it had taken it and were running it), so the rest
 * wait for its capacity. Nothing sets such entries aside (only capacity stops them), so they stay
 * at the head of the claim path while the fleet re-polls. The busy runner never polls: it is
 * marked offline (and its entries set aside) only after two poll windows, past the sample.
 */
async function busyBacklog(env: BenchEnv, d: Deployment, fleetOf: FleetOf, runners: number, notes: string[]): Promise<Figure[]> {
  const { sizes } = env;
  const busy = fleetOf(d, 1, 1, { namePrefix: 'backlog-busy', waitMs: sizes.fleetWaitMs, labels: ['bench-busy'] });
  await busy.register();
  env.progress(`fleet: ${n(sizes.fleetBacklog)} entries only a busy runner can take, under ${n(runners)} parked runners`);
  await prequeue(d.pool, { entries: sizes.fleetBacklog, stepsPerRun: 50, label: 'fleet-busy', requirement: { labels: ['bench-busy'] }, progress: env.progress });
  await d.pool.query(
    `WITH q AS (DELETE FROM queue_ready WHERE step_id = (SELECT step_id FROM queue_ready WHERE requirement->'labels' ? 'bench-busy' ORDER BY step_id LIMIT 1) RETURNING *)
     INSERT INTO step_leases (step_id, run_id, shard, attempt, priority, lane, fair_key, weight, pools, requirement, load, run_scope, max_parallel,
                              site_stamp, ready_at, enqueued_at, position, holder, delivered_at, acked_at, executing, runner_id, expires_at)
     SELECT q.step_id, q.run_id, q.shard, q.attempt, q.priority, q.lane, q.fair_key, q.weight, q.pools, q.requirement, q.load, q.run_scope, q.max_parallel,
            q.site_stamp, q.ready_at, q.enqueued_at, q.position, 'bench', now(), now(), true, r.id, now() + interval '1 hour'
       FROM q, runners r WHERE r.name LIKE 'backlog-busy-%'`,
  );
  await queueNotify(d.pool);
  // The first ticks judge the entries over the whole fleet (busy, so they stay claimable).
  await new Promise((r) => setTimeout(r, 2_000));
  const { rows } = await d.pool.query(`SELECT count(*)::int AS n FROM queue_ready WHERE blocked_on IS NULL AND requirement->'labels' ? 'bench-busy'`);
  env.progress(`fleet: sampling ${sizes.fleetSampleMs / 1000} s over ${n(rows[0].n)} entries waiting for the busy runner`);
  const s = await sample(env, d, sizes.fleetSampleMs);
  notes.push(`fleet busy backlog: ${rows[0].n} entries in the claim path when sampled; most frequent statements: ${s.top}`);
  if (s.cpuPct === null) return [];
  return [
    capped(`server CPU, ${n(runners)} parked over a backlog waiting for a busy runner (% of a core)`, s.cpuPct, '%', 10, '≤ 10', `statements/s: ${s.statementsPerSec === null ? '—' : round(s.statementsPerSec, 3)}`),
  ];
}
