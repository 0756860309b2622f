import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { validateRunFile } from '../src/core/runfile.js';
import { readServerRecord } from '../src/home.js';
import type { LoadedRunFile } from '../src/orchestrator/runfile.js';
import { runSubmit } from '../src/orchestrator/submit.js';
import { createPool, type Pool } from '../src/store/pool.js';
import { tokenCreate } from '../src/store/tokens.js';
import type { BenchArgs, ScenarioName, Sizes } from './args.js';
import type { Baseline } from './baseline.js';
import { consoleFigures } from './console.js';
import { prequeue, readyCount } from './prequeue.js';
import { checkpoint, costDelta, costSnapshot, costSum, topStatements, type BenchPostgres, type CostDelta, type Databases, type TopStatement } from './pg.js';
import { onCleanup, ServerProcess } from './procs.js';
import { SimFleet } from './sim-fleet.js';
import { figure, percentile, perSecond, round, type Figure } from './stats.js';

export interface BenchEnv {
  pg: BenchPostgres;
  dbs: Databases;
  args: BenchArgs;
  sizes: Sizes;
  baseline: Baseline;
  progress: (m: string) => void;
}

/** One database with N opschain replicas on it, and a pool for the bench's own writes. */
export interface Deployment {
  db: { name: string; url: string };
  pool: Pool;
  servers: ServerProcess[];
  urls: string[];
  registrationToken: string;
  stop(): Promise<void>;
}

/** What a drain of the throughput workload measured. */
export interface DrainResult {
  steps: number;
  ms: number;
  stepsPerSecond: number;
  /** Store cost of submitting the runs, and of draining them. */
  submitCost: CostDelta;
  drainCost: CostDelta;
  top: TopStatement[];
  /** CPU (ms) over the drain: every opschain server together, and this process (the simulated fleet). */
  serverCpuMs: number | null;
  fleetCpuMs: number;
}

const MIB = 1024 * 1024;

/** A run of `steps` independent no-op steps, validated like a run file. */
export function benchRunFile(name: string, project: string, steps: number): LoadedRunFile {
  const source = { name, project, steps: Object.fromEntries(Array.from({ length: steps }, (_, i) => [`s${i}`, { run: 'true' }])) };
  const result = validateRunFile(source);
  if (!result.ok) throw new Error(`bench run file refused: ${JSON.stringify(result.problems)}`);
  return { definition: result.definition, source };
}

/** Runs `fn` over 0..n-1 with at most `concurrency` in flight. */
async function forEachLimited(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

export class OpschainBench {
  readonly notes: string[] = [];
  private throughputResult?: Promise<DrainResult>;

  /** How long a drain may take before the scenario is declared failed. */
  private readonly limitMs: number;

  constructor(private readonly env: BenchEnv) {
    this.limitMs = env.args.quick ? 90_000 : 900_000;
  }

  /** Starts `replicas` real `opschain server start` processes on a fresh database. */
  async deploy(label: string, replicas: number): Promise<Deployment> {
    const { env } = this;
    const db = await env.dbs.create(label);
    const pool = createPool(db.url, { max: 8, applicationName: 'opschain-bench', statementTimeoutMs: 1_800_000, queryTimeoutMs: 1_800_000 });
    const homes: string[] = [];
    const servers: ServerProcess[] = [];
    const stop = async () => {
      await Promise.all(servers.map((s) => s.stop()));
      servers.forEach((s, i) => {
        const errors = s.errorLines();
        if (errors.length) this.notes.push(`${label}: server ${i} logged ${errors.length} error line(s); first: ${errors[0].slice(0, 600)}`);
      });
      await pool.end().catch(() => {});
      for (const h of homes) rmSync(h, { recursive: true, force: true });
    };
    const unregister = onCleanup(stop);
    try {
      // One at a time: the first applies the migrations, the rest find them applied.
      for (let i = 0; i < replicas; i++) {
        const home = mkdtempSync(join(tmpdir(), `opschain-bench-${label}-`));
        homes.push(home);
        const server = new ServerProcess({ databaseUrl: db.url, home, cpuProfDir: env.args.cpuProfDir, name: `${label}-${i}` });
        servers.push(server);
        await server.ready(async () => readServerRecord(home)?.url);
      }
      const { secret } = await tokenCreate(pool, { kind: 'registration', name: `bench-${label}` });
      return {
        db,
        pool,
        servers,
        urls: servers.map((s) => s.url),
        registrationToken: secret,
        stop: async () => {
          unregister();
          await stop();
        },
      };
    } catch (err) {
      unregister();
      await stop();
      throw err;
    }
  }

  private fleet(d: Deployment, runners: number, slots: number, extra: Partial<ConstructorParameters<typeof SimFleet>[0]> = {}): SimFleet {
    const seen = new Set<string>();
    const log = (m: string) => {
      // One note per kind of error (the runner name and retry count vary).
      const kind = m.replace(/^runner \S+: /, '').replace(/ \(retry \d+\)$/, '');
      if (seen.has(kind) || seen.size >= 5) return;
      seen.add(kind);
      this.notes.push(`${d.db.name}: simulated runner: ${m}`);
    };
    const fleet = new SimFleet({ urls: d.urls, registrationToken: d.registrationToken, runners, slots, log, ...extra });
    onCleanup(() => fleet.stop());
    return fleet;
  }

  /** Submits `runs` runs of `stepsPerRun` independent steps through the orchestrator, as a CLI submit would. */
  private async submitRuns(d: Deployment, runs: number, stepsPerRun: number, label: string): Promise<void> {
    let done = 0;
    let lastReport = performance.now();
    await forEachLimited(runs, 4, async (i) => {
      await runSubmit(d.pool, benchRunFile(`${label}-${i}`, `proj-${i % 8}`, stepsPerRun), { actor: 'bench' });
      done++;
      if (performance.now() - lastReport > 5_000) {
        lastReport = performance.now();
        this.env.progress(`${label}: ${done}/${runs} runs submitted`);
      }
    });
  }

  /** Every run submitted for a drain must have finished succeeded, and no item refused. */
  private async checkDrained(d: Deployment, fleet: SimFleet, what: string): Promise<void> {
    if (fleet.counters.refused > 0) this.notes.push(`${what}: ${fleet.counters.refused} lease items refused during the drain`);
    const { rows } = await d.pool.query(`SELECT status, count(*)::int AS n FROM runs GROUP BY status`);
    const notDone = rows.filter((r) => r.status !== 'succeeded');
    if (notDone.length) throw new Error(`${what}: runs not succeeded after the drain: ${JSON.stringify(notDone)}`);
  }

  /**
   * The throughput workload over `replicas` replicas: N steps as runs of 10 independent steps,
   * submitted first, then drained by the fleet; timed from the first offer to the last
   * completion answered (every completion answered is committed).
   */
  private async drain(label: string, replicas: number): Promise<DrainResult> {
    const { env } = this;
    const { sizes } = env;
    const d = await this.deploy(label, replicas);
    try {
      const runs = Math.ceil(sizes.throughputSteps / sizes.stepsPerRun);
      const steps = runs * sizes.stepsPerRun;
      const fleet = this.fleet(d, sizes.runners, sizes.runnerSlots);
      await fleet.register();
      await checkpoint(env.pg);
      const c0 = await costSnapshot(env.pg, d.db.name);
      env.progress(`${label}: submitting ${runs} runs of ${sizes.stepsPerRun} steps`);
      await this.submitRuns(d, runs, sizes.stepsPerRun, label);
      const c1 = await costSnapshot(env.pg, d.db.name);
      const serverCpu = () => d.servers.reduce<number | null>((n, s) => (n === null || s.cpuMs() === null ? null : n + s.cpuMs()!), 0);
      const server0 = serverCpu();
      const fleet0 = process.cpuUsage();
      env.progress(`${label}: draining ${steps} steps with ${sizes.runners} runners (${sizes.runnerSlots} offers per acquire) over ${replicas} replica${replicas === 1 ? '' : 's'}`);
      fleet.start();
      await fleet.until((c) => c.completed >= steps, this.limitMs, `${steps} completions`);
      const ms = fleet.counters.lastCompleteAt - fleet.counters.firstOfferAt;
      const c2 = await costSnapshot(env.pg, d.db.name);
      const server1 = serverCpu();
      const fleetUsage = process.cpuUsage(fleet0);
      await fleet.stop();
      this.notes.push(`${label}: runner cycle: ${fleet.cycleSummary()}`);
      await this.checkDrained(d, fleet, label);
      const top = await topStatements(env.pg, d.db.name, 12);
      return {
        steps,
        ms,
        stepsPerSecond: perSecond(steps, ms),
        submitCost: costDelta(c0, c1),
        drainCost: costDelta(c1, c2),
        top,
        serverCpuMs: server0 === null || server1 === null ? null : server1 - server0,
        fleetCpuMs: (fleetUsage.user + fleetUsage.system) / 1000,
      };
    } finally {
      await d.stop();
    }
  }

  private throughput(): Promise<DrainResult> {
    return (this.throughputResult ??= this.drain('throughput', 1));
  }

  async scenario(name: ScenarioName): Promise<Figure[]> {
    switch (name) {
      case 'throughput':
        return this.throughputFigures();
      case 'latency':
        return this.latencyFigures();
      case 'depth':
        return this.depthFigures();
      case 'replicas':
        return this.replicaFigures();
      case 'memory':
        return this.memoryFigures();
      case 'store-cost':
        return this.storeCostFigures();
      case 'console':
        return consoleFigures(this.env);
    }
  }

  private async throughputFigures(): Promise<Figure[]> {
    const base = await this.env.baseline.throughput();
    const t = await this.throughput();
    const f = figure({ scenario: 'throughput', metric: `steps/s (${t.steps} steps, 1 replica, ${this.env.sizes.runners} runners)`, value: t.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher', target: '≥ 1.0× graphile-worker' });
    f.met = f.ratio !== null && f.ratio >= 1;
    return [f];
  }

  private async latencyFigures(): Promise<Figure[]> {
    const { env } = this;
    const { sizes } = env;
    const base = await env.baseline.latency();
    const d = await this.deploy('latency', 1);
    try {
      const offered = new Map<number, number>();
      const fleet = this.fleet(d, sizes.latencyRunners, 1, { onOffer: (o, at) => offered.set(Number(o.run_id), at) });
      await fleet.register();
      fleet.start();
      await fleet.until((c) => c.parked >= sizes.latencyRunners, 30_000, 'every runner parked');
      // One run first, so connections and statement plans are as warm as on a live server.
      const warm = await runSubmit(d.pool, benchRunFile('latency-warm', 'latency', 1), { actor: 'bench' });
      await fleet.until(() => offered.has(warm.runId), 30_000, 'the warm-up offer');
      await fleet.until((c) => c.parked >= sizes.latencyRunners && c.completed >= 1, 30_000, 'every runner parked again');
      env.progress(`latency: ${sizes.latencyRuns} single-step runs submitted ${sizes.latencySpacingMs} ms apart to ${sizes.latencyRunners} parked runners`);
      const submitted = new Map<number, number>();
      const submitMs: number[] = [];
      const t0 = performance.now();
      for (let i = 0; i < sizes.latencyRuns; i++) {
        const wait = t0 + i * sizes.latencySpacingMs - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        const at = performance.now();
        const { runId } = await runSubmit(d.pool, benchRunFile(`latency-${i}`, 'latency', 1), { actor: 'bench' });
        submitMs.push(performance.now() - at);
        submitted.set(runId, at);
      }
      await fleet.until(() => [...submitted.keys()].every((id) => offered.has(id)), 60_000, 'an offer for every run');
      await fleet.until((c) => c.completed >= sizes.latencyRuns + 1, 30_000, 'every completion');
      await fleet.stop();
      const samples = [...submitted].map(([id, at]) => offered.get(id)! - at);
      const p50 = figure({ scenario: 'latency', metric: 'submit→offer p50', value: percentile(samples, 50), unit: 'ms', baseline: base.p50Ms, better: 'lower', target: '≤ graphile-worker p50' });
      p50.met = p50.ratio !== null && p50.ratio <= 1;
      const p99 = figure({ scenario: 'latency', metric: 'submit→offer p99', value: percentile(samples, 99), unit: 'ms', baseline: base.p99Ms, better: 'lower', target: '≤ 10 ms' });
      p99.met = p99.value <= 10;
      const max = figure({ scenario: 'latency', metric: 'submit→offer max', value: Math.max(...samples), unit: 'ms', baseline: base.maxMs, better: 'lower' });
      // The split: how much of it is the submit transaction itself (commit is what wakes the dispatcher).
      const call = figure({ scenario: 'latency', metric: 'submit call (run + steps + enqueue committed) p50', value: percentile(submitMs, 50), unit: 'ms', better: 'lower' });
      this.notes.push(`latency: runner cycle: ${fleet.cycleSummary()}`);
      return [p50, p99, max, call];
    } finally {
      await d.stop();
    }
  }

  /**
   * Throughput with D ready entries already queued (spread over projects and lanes): at each
   * depth the fleet drains a fixed number of steps; the backlog is topped up between depths.
   */
  private async depthFigures(): Promise<Figure[]> {
    const { env } = this;
    const { sizes } = env;
    const base = await env.baseline.throughput();
    const d = await this.deploy('depth', 1);
    const figures: Figure[] = [];
    try {
      const rates: number[] = [];
      for (const depth of sizes.depths) {
        const have = await readyCount(d.pool);
        if (have < depth) {
          env.progress(`depth: queueing ${depth - have} ready entries (to ${depth})`);
          await prequeue(d.pool, { entries: depth - have, stepsPerRun: sizes.stepsPerRun, label: `depth-${depth}`, progress: env.progress });
        }
        const fleet = this.fleet(d, sizes.runners, sizes.runnerSlots, { namePrefix: `depth${depth}` });
        await fleet.register();
        // The first fifth of each drain is warm-up (connections, plans, JIT of a fresh fleet);
        // the rate is taken over the rest, so every depth is measured in the same steady state.
        const warm = Math.round(sizes.depthDrain / 5);
        env.progress(`depth: draining ${warm} + ${sizes.depthDrain} of ${depth} ready entries (the first ${warm} untimed)`);
        fleet.start();
        await fleet.until((c) => c.completed >= warm, this.limitMs, `${warm} warm-up completions at depth ${depth}`);
        const from = { at: performance.now(), completed: fleet.counters.completed };
        await fleet.until((c) => c.completed >= from.completed + sizes.depthDrain, this.limitMs, `${sizes.depthDrain} completions at depth ${depth}`);
        const rate = perSecond(fleet.counters.completed - from.completed, fleet.counters.lastCompleteAt - from.at);
        await fleet.stop();
        this.notes.push(`depth ${depth}: runner cycle: ${fleet.cycleSummary()}`);
        rates.push(rate);
        figures.push(figure({ scenario: 'depth', metric: `steps/s at ${depth.toLocaleString('en-US')} ready`, value: rate, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher' }));
      }
      const first = sizes.depths[0];
      const last = sizes.depths[sizes.depths.length - 1];
      const kept = rates[rates.length - 1] / rates[0];
      const f = figure({ scenario: 'depth', metric: `${last.toLocaleString('en-US')} vs ${first.toLocaleString('en-US')} ready`, value: kept * 100, unit: '%', better: 'higher', target: '≥ 90%' });
      f.met = kept >= 0.9;
      figures.push(f);
      return figures;
    } finally {
      await d.stop();
    }
  }

  private async replicaFigures(): Promise<Figure[]> {
    const { env } = this;
    const base = await env.baseline.throughput();
    const one = this.env.args.scenarios.includes('throughput') ? await this.throughput() : undefined;
    const r = await this.drain('replicas', env.sizes.replicas);
    const f = figure({ scenario: 'replicas', metric: `steps/s (${r.steps} steps, ${env.sizes.replicas} replicas, ${env.sizes.runners} runners)`, value: r.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher', target: '≥ 1 replica' });
    if (one) {
      f.met = r.stepsPerSecond >= one.stepsPerSecond;
      f.note = `1 replica: ${round(one.stepsPerSecond)} steps/s; ${env.sizes.replicas} replicas: ${round((r.stepsPerSecond / one.stepsPerSecond) * 100)}% of it`;
    } else {
      f.met = null;
      f.note = 'run with the throughput scenario to compare with one replica';
    }
    return [f];
  }

  /** Server RSS with a deep backlog nobody parked can take, and many parked runners. */
  private async memoryFigures(): Promise<Figure[]> {
    const { env } = this;
    const { sizes } = env;
    const d = await this.deploy('memory', 1);
    try {
      env.progress(`memory: queueing ${sizes.memoryEntries} ready entries that need the label 'bench-unplaceable'`);
      await prequeue(d.pool, { entries: sizes.memoryEntries, stepsPerRun: sizes.stepsPerRun, label: 'memory', requirement: { labels: ['bench-unplaceable'] }, progress: env.progress });
      const server = d.servers[0];
      const idle = server.memory();
      const fleet = this.fleet(d, sizes.memoryRunners, 1, { namePrefix: 'parked' });
      env.progress(`memory: registering and parking ${sizes.memoryRunners} runners`);
      await fleet.register();
      fleet.start();
      await fleet.until((c) => c.parked >= sizes.memoryRunners, 120_000, 'every runner parked');
      let rss = 0;
      const until = performance.now() + sizes.memorySampleMs;
      while (performance.now() < until) {
        rss = Math.max(rss, server.memory()?.rss ?? NaN);
        await new Promise((r) => setTimeout(r, 100));
      }
      const hwm = server.memory()?.hwm ?? NaN;
      const parkedAtEnd = fleet.counters.parked;
      await fleet.stop();
      if (fleet.counters.offers > 0) this.notes.push(`memory: ${fleet.counters.offers} offers were made although no runner has the label`);
      const label = `${sizes.memoryEntries.toLocaleString('en-US')} ready, ${sizes.memoryRunners.toLocaleString('en-US')} parked runners`;
      const f = figure({ scenario: 'memory', metric: `server RSS (${label})`, value: rss / MIB, unit: 'MiB', better: 'lower', target: '≤ 200 MB', note: `${parkedAtEnd} acquires parked at the end` });
      f.met = rss <= 200 * 1e6;
      const peak = figure({ scenario: 'memory', metric: 'server RSS high-water mark', value: hwm / MIB, unit: 'MiB', better: 'lower' });
      const start = figure({ scenario: 'memory', metric: `server RSS before the runners (${sizes.memoryEntries.toLocaleString('en-US')} ready)`, value: (idle?.rss ?? NaN) / MIB, unit: 'MiB', better: 'lower' });
      return [start, f, peak];
    } finally {
      await d.stop();
    }
  }

  private async storeCostFigures(): Promise<Figure[]> {
    const { env } = this;
    if (!env.pg.statements) this.notes.push('store cost: pg_stat_statements is not loaded on this PostgreSQL; only WAL is measured');
    const base = await env.baseline.throughput();
    const t = await this.throughput();
    const out: Figure[] = [];
    const per = (v: number | null, n: number) => (v === null ? null : v / n);
    const total = costSum(t.submitCost, t.drainCost);
    const baseTotal = costSum(base.addCost, base.drainCost);
    const push = (metric: string, v: number | null, b: number | null, unit: string, target?: string) => {
      if (v === null) return;
      const f = figure({ scenario: 'store-cost', metric, value: v, unit, baseline: b, better: 'lower', target });
      if (target) f.met = f.ratio !== null && f.ratio <= 2;
      out.push(f);
    };
    push('DB exec ms/step (submit + drain)', per(total.execMs, t.steps), per(baseTotal.execMs, base.jobs), 'ms', '≤ 2× graphile-worker');
    push('WAL bytes/step (submit + drain)', per(total.walBytes, t.steps), per(baseTotal.walBytes, base.jobs), 'B', '≤ 2× graphile-worker');
    push('DB process CPU ms/step (submit + drain)', per(total.cpuMs, t.steps), per(baseTotal.cpuMs, base.jobs), 'ms');
    push('DB exec ms/step (drain only)', per(t.drainCost.execMs, t.steps), per(base.drainCost.execMs, base.jobs), 'ms');
    push('WAL bytes/step (drain only)', per(t.drainCost.walBytes, t.steps), per(base.drainCost.walBytes, base.jobs), 'B');
    push('DB process CPU ms/step (drain only)', per(t.drainCost.cpuMs, t.steps), per(base.drainCost.cpuMs, base.jobs), 'ms');
    // The whole CPU budget of a drained step on this machine: where the cores go.
    push('opschain server CPU ms/step (drain)', per(t.serverCpuMs, t.steps), null, 'ms');
    push('simulated fleet CPU ms/step (drain, bench process)', per(t.fleetCpuMs, t.steps), null, 'ms');
    push('statements/step (submit + drain)', per(total.calls, t.steps), per(baseTotal.calls, base.jobs), 'calls');
    for (const s of t.top.slice(0, 8)) {
      this.notes.push(`top statement (opschain throughput): ${round(s.totalMs)} ms total, ${s.calls} calls, ${round(s.meanMs)} ms/call, ${s.rows} rows: ${s.query}`);
    }
    for (const s of base.top.slice(0, 5)) {
      this.notes.push(`top statement (graphile-worker): ${round(s.totalMs)} ms total, ${s.calls} calls, ${round(s.meanMs)} ms/call, ${s.rows} rows: ${s.query}`);
    }
    return out;
  }
}
