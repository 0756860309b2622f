import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { validateRunFile } from '../src/core/runfile.js';
import { readServerRecord } from '../src/home.js';
import type { LoadedRunFile } from '../src/orchestrator/runfile.js';
import { runSubmit, runSubmitMany } from '../src/orchestrator/submit.js';
import { createPool, type Pool } from '../src/store/pool.js';
import { queueNotify } from '../src/store/queue.js';
import { tokenCreate } from '../src/store/tokens.js';
import type { BenchArgs, ScenarioName, Sizes } from './args.js';
import type { Baseline } from './baseline.js';
import { capacityFigures } from './capacity.js';
import { chainFigures } from './chain.js';
import { fleetFigures } from './fleet.js';
import { consoleFigures } from './console.js';
import { startupFigures } from './startup.js';
import { triggerFigures } from './triggers.js';
import { floorDrain, type FloorResult } from './floor.js';
import { paced } from './pace.js';
import { prequeue, readyCount } from './prequeue.js';
import { checkpoint, statsReset, costDelta, costSnapshot, costSum, topStatements, walByRelation, walSharesNote, type BenchPostgres, type CostDelta, type Databases, type TopStatement } from './pg.js';
import { SpanCounter } from './otlp-sink.js';
import { onCleanup, ServerProcess } from './procs.js';
import { SimFleet } from './sim-fleet.js';
import { figure, median, percentile, perSecond, round, type Figure } from './stats.js';

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
  /** Transport errors and 5xx answers the fleet retried. */
  errors: number;
}

const MIB = 1024 * 1024;

/** Polls `cond` every 100 ms until it holds; fails naming `what` after `limitMs`. */
async function waitUntil(cond: () => Promise<boolean>, limitMs: number, what: string): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (!(await cond())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${limitMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** A run of `steps` independent no-op steps, validated like a run file. */
export function benchRunFile(name: string, project: string, steps: number): LoadedRunFile {
  const source = { name, project, steps: Object.fromEntries(Array.from({ length: steps }, (_, i) => [`s${i}`, { run: 'true' }])) };
  const result = validateRunFile(source);
  if (!result.ok) throw new Error(`bench run file refused: ${JSON.stringify(result.problems)}`);
  return { definition: result.definition, source };
}

/**
 * A run of `steps` steps with needs, validated like a run file: a chain (each step needs the one
 * before) or a diamond (one root, `steps - 2` middle steps that need it, one last step that needs
 * them all).
 */
export function benchDagRunFile(name: string, project: string, kind: 'chain' | 'diamond', steps: number): LoadedRunFile {
  const names = Array.from({ length: steps }, (_, i) => `s${i}`);
  const needs = (i: number): string[] => {
    if (i === 0) return [];
    if (kind === 'chain') return [names[i - 1]];
    return i === steps - 1 ? names.slice(1, steps - 1) : [names[0]];
  };
  const source = { name, project, steps: Object.fromEntries(names.map((n, i) => [n, i === 0 ? { run: 'true' } : { run: 'true', needs: needs(i) }])) };
  const result = validateRunFile(source);
  if (!result.ok) throw new Error(`bench run file refused: ${JSON.stringify(result.problems)}`);
  return { definition: result.definition, source };
}

/** How a drain's runs are shaped and who drains them. */
interface DrainShape {
  runners: number;
  slots: number;
  /** Run i of the workload (default: stepsPerRun independent steps). */
  file?: (i: number, label: string) => LoadedRunFile;
  /** What the runs are, for the progress line. */
  what?: string;
  /** Submitted in calls of this many runs (runSubmitMany) instead of one call per run. */
  bulk?: number;
  /** More environment for the servers (the traced drain's OTLP endpoint). */
  serverEnv?: NodeJS.ProcessEnv;
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
  private floorResult?: Promise<FloorResult>;

  /** How long a drain may take before the scenario is declared failed. */
  private readonly limitMs: number;

  constructor(private readonly env: BenchEnv) {
    this.limitMs = env.args.quick ? 90_000 : 900_000;
  }

  /** Starts `replicas` real `opschain server start` processes on a fresh database. */
  async deploy(label: string, replicas: number, serverEnv?: NodeJS.ProcessEnv): Promise<Deployment> {
    const { env } = this;
    const db = await env.dbs.create(label);
    // The bench submits as a long-lived client does (a server's submit path): its statements prepared.
    const pool = createPool(db.url, { max: 8, applicationName: 'opschain-bench', statementTimeoutMs: 1_800_000, queryTimeoutMs: 1_800_000, preparedStatements: true });
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
        const server = new ServerProcess({ databaseUrl: db.url, home, cpuProfDir: env.args.cpuProfDir, name: `${label}-${i}`, env: serverEnv });
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

  /** Submits `runs` runs through the orchestrator one call each, four at a time, as CLI submits would. */
  private async submitRuns(d: Deployment, runs: number, file: (i: number) => LoadedRunFile, label: string): Promise<void> {
    let done = 0;
    let lastReport = performance.now();
    await forEachLimited(runs, 4, async (i) => {
      await runSubmit(d.pool, file(i), { actor: 'bench' });
      done++;
      if (performance.now() - lastReport > 5_000) {
        lastReport = performance.now();
        this.env.progress(`${label}: ${done}/${runs} runs submitted`);
      }
    });
  }

  /** A drain's runs, submitted as its shape says: in bulk calls, or one call each. */
  private async submitWorkload(d: Deployment, shape: DrainShape, runs: number, file: (i: number) => LoadedRunFile, label: string): Promise<void> {
    if (!shape.bulk) return this.submitRuns(d, runs, file, label);
    for (let i = 0; i < runs; i += shape.bulk) await runSubmitMany(d.pool, Array.from({ length: Math.min(shape.bulk, runs - i) }, (_, k) => file(i + k)), { actor: 'bench' });
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
  private async drain(label: string, replicas: number, shape: DrainShape = { runners: this.env.sizes.runners, slots: this.env.sizes.runnerSlots }): Promise<DrainResult> {
    const { env } = this;
    const { sizes } = env;
    const d = await this.deploy(label, replicas, shape.serverEnv);
    try {
      const runs = Math.ceil(sizes.throughputSteps / sizes.stepsPerRun);
      const steps = runs * sizes.stepsPerRun;
      const file = shape.file ?? ((i: number, l: string) => benchRunFile(`${l}-${i}`, `proj-${i % 8}`, sizes.stepsPerRun));
      await this.warmUp(d, shape, file, label);
      const fleet = this.fleet(d, shape.runners, shape.slots);
      await fleet.register();
      await statsReset(env.pg, d.db);
      await checkpoint(env.pg);
      const c0 = await costSnapshot(env.pg, d.db.name);
      env.progress(`${label}: submitting ${runs} runs of ${sizes.stepsPerRun} ${shape.what ?? 'independent'} steps`);
      await this.submitWorkload(d, shape, runs, (i) => file(i, label), label);
      const c1 = await costSnapshot(env.pg, d.db.name);
      const serverCpu = () => d.servers.reduce<number | null>((n, s) => (n === null || s.cpuMs() === null ? null : n + s.cpuMs()!), 0);
      const server0 = serverCpu();
      const fleet0 = process.cpuUsage();
      env.progress(`${label}: draining ${steps} steps with ${shape.runners} runners (${shape.slots} offers per acquire) over ${replicas} replica${replicas === 1 ? '' : 's'}`);
      fleet.start();
      await fleet.until((c) => c.completed >= steps, this.limitMs, `${steps} completions`);
      const ms = fleet.counters.lastCompleteAt - fleet.counters.firstOfferAt;
      const c2 = await costSnapshot(env.pg, d.db.name);
      const server1 = serverCpu();
      const fleetUsage = process.cpuUsage(fleet0);
      await fleet.stop();
      this.notes.push(`${label}: runner cycle: ${fleet.cycleSummary()}`);
      await this.checkDrained(d, fleet, label);
      if (replicas > 1) this.notes.push(`${label}: by replica (shards held, steps run by its runners, seconds from its first start to its last finish): ${await replicaShares(d.pool)}`);
      const top = await topStatements(env.pg, d.db.name, 12);
      const frequent = await topStatements(env.pg, d.db.name, 10, 'calls');
      this.notes.push(`${label}: most frequent statements (calls per step): ${frequent.map((s) => `${round(s.calls / steps, 3)} ${s.query.slice(0, 70)}`).join(' | ')}`);
      this.notes.push(`${label}: statements by database time (ms per step, ms per call): ${top.slice(0, 8).map((s) => `${round(s.totalMs / steps, 4)} ${round(s.meanMs, 3)} ${s.query.slice(0, 60)}`).join(' | ')}`);
      // Which indexes the workload used: an index nothing scans only costs writes.
      const { rows: idx } = await d.pool.query(
        `SELECT relname, indexrelname, idx_scan::float8 AS scans FROM pg_stat_user_indexes
          WHERE relname IN ('queue_ready', 'step_leases', 'completed_attempts', 'steps', 'runs', 'step_logs', 'pool_holds') ORDER BY relname, indexrelname`,
      );
      this.notes.push(`${label}: index scans: ${idx.map((r) => `${r.indexrelname} ${r.scans}`).join(', ')}`);
      // An update that changes no indexed column and finds room on its page is HOT: no index entries, less WAL.
      const { rows: upd } = await d.pool.query(
        `SELECT relname, n_tup_upd::float8 AS upd, n_tup_hot_upd::float8 AS hot FROM pg_stat_user_tables
          WHERE relname IN ('steps', 'runs', 'step_leases') ORDER BY relname`,
      );
      this.notes.push(`${label}: updates (HOT): ${upd.map((r) => `${r.relname} ${r.upd} (${r.hot})`).join(', ')}`);
      for (const [phase, from, to] of [['submit', c0, c1], ['drain', c1, c2]] as const) {
        const wal = await walByRelation(d.db.url, from, to);
        if (wal.length > 0) this.notes.push(`${label}: WAL bytes/step of the ${phase} by relation (of which full-page images): ${walSharesNote(wal, steps, 14)}`);
      }
      return {
        steps,
        ms,
        stepsPerSecond: perSecond(steps, ms),
        submitCost: costDelta(c0, c1),
        drainCost: costDelta(c1, c2),
        top,
        serverCpuMs: server0 === null || server1 === null ? null : server1 - server0,
        fleetCpuMs: (fleetUsage.user + fleetUsage.system) / 1000,
        errors: fleet.counters.errors,
      };
    } finally {
      await d.stop();
    }
  }

  /**
   * Drains `warmupSteps` per server of the same workload, untimed, with a fleet of the same shape
   * (stopped after), so the drain that is measured runs on warm servers as live ones are: their
   * code compiled, their connections open, their statements prepared. Each replica of a
   * deployment warms as much as a lone server does: V8 tiers code up per process.
   */
  private async warmUp(d: Deployment, shape: DrainShape, file: (i: number, label: string) => LoadedRunFile, label: string): Promise<void> {
    const { sizes } = this.env;
    const runs = Math.ceil((sizes.warmupSteps * d.servers.length) / sizes.stepsPerRun);
    if (runs === 0) return;
    const warm = this.fleet(d, shape.runners, shape.slots, { namePrefix: 'warm' });
    await warm.register();
    this.env.progress(`${label}: warm-up, ${runs * sizes.stepsPerRun} steps drained untimed`);
    await this.submitWorkload(d, shape, runs, (i) => file(i, `${label}-warm`), `${label} warm-up`);
    warm.start();
    try {
      await warm.until((c) => c.completed >= runs * sizes.stepsPerRun, this.limitMs, 'the warm-up completions');
    } finally {
      await warm.stop();
    }
  }

  private throughput(): Promise<DrainResult> {
    return (this.throughputResult ??= this.drain('throughput', 1));
  }

  async scenario(name: ScenarioName): Promise<Figure[]> {
    switch (name) {
      case 'throughput':
        return this.throughputFigures();
      case 'wide':
        return this.wideFigures();
      case 'dag':
        return this.dagFigures();
      case 'submit':
        return this.submitFigures();
      case 'floor':
        return this.floorFigures();
      case 'latency':
        return this.latencyFigures();
      case 'depth':
        return this.depthFigures();
      case 'replicas':
        return this.replicaFigures();
      case 'memory':
        return this.memoryFigures();
      case 'idle':
        return this.idleFigures();
      case 'store-cost':
        return this.storeCostFigures();
      case 'console':
        return consoleFigures(this.env);
      case 'triggers':
        return triggerFigures(this.env, (label, replicas) => this.deploy(label, replicas));
      case 'startup':
        return startupFigures(this.env, (label, replicas) => this.deploy(label, replicas));
      case 'capacity':
        return capacityFigures(this.env);
      case 'fleet':
        return fleetFigures(this.env, (label, replicas) => this.deploy(label, replicas), (d, runners, slots, extra) => this.fleet(d, runners, slots, extra), this.notes);
      case 'chain':
        return chainFigures(this.env, (label, replicas) => this.deploy(label, replicas), (d, runners, slots, extra) => this.fleet(d, runners, slots, extra));
    }
  }

  /** The SQL floor, measured once per run on its own database. */
  private floor(): Promise<FloorResult> {
    return (this.floorResult ??= (async () => {
      const db = await this.env.dbs.create('floor');
      this.env.progress(`floor: ${this.env.sizes.throughputSteps} rows, ${this.env.sizes.floorWorkers} connections claiming ${this.env.sizes.floorClaim} with SKIP LOCKED, then deleting`);
      return floorDrain(this.env.pg, db, this.env.sizes.throughputSteps, this.env.sizes);
    })());
  }

  /** "x% of the SQL floor", when the floor scenario is part of this run. */
  private async floorNote(stepsPerSecond: number): Promise<string | undefined> {
    if (!this.env.args.scenarios.includes('floor')) return undefined;
    const fl = await this.floor();
    return `${round((stepsPerSecond / fl.jobsPerSecond) * 100)}% of the SQL floor (${round(fl.jobsPerSecond)} jobs/s)`;
  }

  private async floorFigures(): Promise<Figure[]> {
    const base = await this.env.baseline.throughput();
    const fl = await this.floor();
    const { sizes } = this.env;
    const out = [figure({ scenario: 'floor', metric: `SQL floor jobs/s (${fl.jobs} rows, ${sizes.floorWorkers} connections, claim ${sizes.floorClaim} SKIP LOCKED + delete)`, value: fl.jobsPerSecond, unit: 'jobs/s', baseline: base.jobsPerSecond, better: 'higher' })];
    const total = costSum(fl.addCost, fl.drainCost);
    const per = (v: number | null) => (v === null ? null : v / fl.jobs);
    const push = (metric: string, v: number | null, unit: string) => {
      if (v !== null) out.push(figure({ scenario: 'floor', metric, value: v, unit, better: 'lower' }));
    };
    push('SQL floor WAL bytes/job (insert + drain)', per(total.walBytes), 'B');
    push('SQL floor DB process CPU ms/job (insert + drain)', per(total.cpuMs), 'ms');
    push('SQL floor statements/job (insert + drain)', per(total.calls), 'calls');
    return out;
  }

  private async wideFigures(): Promise<Figure[]> {
    const { sizes } = this.env;
    const base = await this.env.baseline.throughput();
    const t = await this.drain('wide', 1, { runners: sizes.wideRunners, slots: sizes.wideSlots });
    const f = figure({ scenario: 'wide', metric: `steps/s (${t.steps} steps, 1 replica, ${sizes.wideRunners} runners × ${sizes.wideSlots} offers)`, value: t.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher', target: '≥ 0.5× graphile-worker' });
    f.met = f.ratio !== null && f.ratio >= 0.5;
    f.note = await this.floorNote(t.stepsPerSecond);
    const per = (v: number | null) => (v === null ? null : v / t.steps);
    const total = costSum(t.submitCost, t.drainCost);
    const out = [f];
    for (const [metric, v, unit] of [
      ['wide: DB process CPU ms/step (submit + drain)', per(total.cpuMs), 'ms'],
      ['wide: WAL bytes/step (submit + drain)', per(total.walBytes), 'B'],
      ['wide: statements/step (submit + drain)', per(total.calls), 'calls'],
      ['wide: opschain server CPU ms/step (drain)', per(t.serverCpuMs), 'ms'],
    ] as Array<[string, number | null, string]>) {
      if (v !== null) out.push(figure({ scenario: 'wide', metric, value: v, unit, better: 'lower' }));
    }
    return out;
  }

  /** The throughput workload as DAG runs: half chains, half diamonds, of stepsPerRun steps each. */
  private async dagFigures(): Promise<Figure[]> {
    const { sizes } = this.env;
    const base = await this.env.baseline.throughput();
    const t = await this.drain('dag', 1, {
      runners: sizes.runners,
      slots: sizes.runnerSlots,
      what: 'chained or diamond',
      file: (i, label) => benchDagRunFile(`${label}-${i}`, `proj-${i % 8}`, i % 2 === 0 ? 'chain' : 'diamond', sizes.stepsPerRun),
    });
    const f = figure({ scenario: 'dag', metric: `steps/s (${t.steps} steps as chains and diamonds of ${sizes.stepsPerRun}, 1 replica, ${sizes.runners} runners)`, value: t.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher' });
    if (this.env.args.scenarios.includes('throughput')) {
      const ind = await this.throughput();
      f.note = `independent steps: ${round(ind.stepsPerSecond)} steps/s; DAG runs: ${round((t.stepsPerSecond / ind.stepsPerSecond) * 100)}% of it`;
    }
    return [f];
  }

  /** Enqueue rate: runs of stepsPerRun steps submitted one call each (4 at a time), and in bulk calls. */
  private async submitFigures(): Promise<Figure[]> {
    const { env } = this;
    const { sizes } = env;
    const base = await env.baseline.throughput();
    const addRate = perSecond(base.jobs, base.addMs);
    const d = await this.deploy('submit', 1);
    try {
      const file = (i: number) => benchRunFile(`submit-${i}`, `proj-${i % 8}`, sizes.stepsPerRun);
      const singleRuns = Math.max(1, Math.round(sizes.bulkRuns / 4));
      env.progress(`submit: ${singleRuns} runs one call each, then ${sizes.bulkRuns} runs in calls of ${sizes.bulkBatch}`);
      const t0 = performance.now();
      await this.submitRuns(d, singleRuns, file, 'submit');
      const singleMs = performance.now() - t0;
      const t1 = performance.now();
      for (let i = 0; i < sizes.bulkRuns; i += sizes.bulkBatch) {
        const batch = Array.from({ length: Math.min(sizes.bulkBatch, sizes.bulkRuns - i) }, (_, k) => file(singleRuns + i + k));
        await runSubmitMany(d.pool, batch, { actor: 'bench' });
      }
      const bulkMs = performance.now() - t1;
      const { rows } = await d.pool.query(`SELECT count(*)::int AS n FROM queue_ready`);
      const expected = (singleRuns + sizes.bulkRuns) * sizes.stepsPerRun;
      if (rows[0].n !== expected) throw new Error(`submit: ${rows[0].n} steps queued, expected ${expected}`);
      const bulk = figure({ scenario: 'submit', metric: `bulk submit steps/s enqueued (${sizes.bulkRuns} runs of ${sizes.stepsPerRun}, ${sizes.bulkBatch} runs per call)`, value: perSecond(sizes.bulkRuns * sizes.stepsPerRun, bulkMs), unit: 'steps/s', baseline: addRate, better: 'higher' });
      bulk.note = `graphile-worker addJobs in batches of 5000: ${round(addRate)} jobs/s`;
      const single = figure({ scenario: 'submit', metric: `submit steps/s enqueued (${singleRuns} runs of ${sizes.stepsPerRun}, one call each, 4 at a time)`, value: perSecond(singleRuns * sizes.stepsPerRun, singleMs), unit: 'steps/s', baseline: addRate, better: 'higher' });
      return [bulk, single];
    } finally {
      await d.stop();
    }
  }

  private async throughputFigures(): Promise<Figure[]> {
    const base = await this.env.baseline.throughput();
    const t = await this.throughput();
    const f = figure({ scenario: 'throughput', metric: `steps/s (${t.steps} steps, 1 replica, ${this.env.sizes.runners} runners)`, value: t.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher', target: '≥ 0.15× graphile-worker' });
    f.met = f.ratio !== null && f.ratio >= 0.15;
    f.note = await this.floorNote(t.stepsPerSecond);
    return [f, await this.tracedFigure(t)];
  }

  /**
   * The throughput drain again with every run exported as a trace to a collector on loopback
   * (docs/tracing.md): the cost of traces is the traced drain's rate against the untraced one's.
   * One pair of drains is at the mercy of whatever else the machine does while it runs (the
   * untraced rate alone moved 2.6× between drains on a loaded 2-core machine), so several pairs
   * are drained interleaved, off and on next to each other, the order alternating (off→on, on→off,
   * …) so a drift over the run favours neither, and the figure is the median of the pairs' own
   * ratios. The first pair's untraced drain is the throughput figure's.
   */
  private async tracedFigure(untraced: DrainResult): Promise<Figure> {
    const { sizes } = this.env;
    const sink = await new SpanCounter().start();
    const unregister = onCleanup(() => sink.stop());
    const shape = { runners: sizes.runners, slots: sizes.runnerSlots };
    const traced = () => this.drain('throughput-traced', 1, { ...shape, serverEnv: { OPSCHAIN_TRACING_ENDPOINT: sink.url } });
    const plain = () => this.drain('throughput-untraced', 1, shape);
    try {
      const pairs: Array<{ off: DrainResult; on: DrainResult }> = [];
      for (let i = 0; i < sizes.tracePairs; i++) {
        if (i === 0) pairs.push({ off: untraced, on: await traced() });
        else if (i % 2 === 1) {
          const on = await traced();
          pairs.push({ on, off: await plain() });
        } else {
          const off = await plain();
          pairs.push({ off, on: await traced() });
        }
        const last = pairs[pairs.length - 1];
        this.env.progress(`throughput with tracing on ÷ off, pair ${i + 1} of ${sizes.tracePairs}: ${round(last.on.stepsPerSecond / last.off.stepsPerSecond, 3)}× (on ${round(last.on.stepsPerSecond)} steps/s, off ${round(last.off.stepsPerSecond)} steps/s)`);
      }
      // Four spans an attempt (itself, its queue, lease and execution) and one a run, warm-up included;
      // each traced server flushed its buffer when it stopped at the end of its drain.
      const steps = untraced.steps + Math.ceil(sizes.warmupSteps / sizes.stepsPerRun) * sizes.stepsPerRun;
      const expected = pairs.length * (steps * 4 + steps / sizes.stepsPerRun);
      const ratios = pairs.map((p) => p.on.stepsPerSecond / p.off.stepsPerSecond);
      const f = figure({
        scenario: 'throughput',
        // The baseline column holds the untraced drains' median rate here; the ratio is the median of the pairs' on ÷ off.
        metric: `throughput with tracing on ÷ off (median of ${pairs.length} interleaved pairs of drains, traced against untraced; ${untraced.steps} steps, 1 replica, ${sizes.runners} runners)`,
        value: median(pairs.map((p) => p.on.stepsPerSecond)),
        unit: 'steps/s',
        baseline: median(pairs.map((p) => p.off.stepsPerSecond)),
        better: 'higher',
        target: '≥ 0.90× untraced (traces cost ≤ 10%)',
      });
      f.ratio = median(ratios);
      f.met = f.ratio >= 0.9;
      const cpu = (r: DrainResult) => (r.serverCpuMs === null ? 'n/a' : `${round(r.serverCpuMs / r.steps, 3)}`);
      this.env.progress(`throughput with tracing on ÷ off: ${round(f.ratio, 3)}× (median of ${pairs.length} pairs: ${ratios.map((r) => `${round(r, 3)}×`).join(', ')}; target ≥ 0.90×)`);
      f.note =
        `value and baseline are the traced and untraced drains' median rates, the ratio the median of the pairs' own; ` +
        `pairs (on/off steps/s, server CPU ms/step on/off): ${pairs.map((p) => `${round(p.on.stepsPerSecond)}/${round(p.off.stepsPerSecond)} (${cpu(p.on)}/${cpu(p.off)})`).join(', ')}; ` +
        `spans received ${sink.spans} of ${expected} in ${sink.requests} exports`;
      return f;
    } finally {
      unregister();
      await sink.stop();
    }
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
      /** The runs submitted `latencySpacingMs` apart, each with its submit time, and each submit call's duration. */
      const sequence = async (name: string) => {
        const submitted = new Map<number, number>();
        const submitMs: number[] = [];
        await paced(sizes.latencyRuns, sizes.latencySpacingMs, async (i) => {
          const at = performance.now();
          const { runId } = await runSubmit(d.pool, benchRunFile(`${name}-${i}`, 'latency', 1), { actor: 'bench' });
          submitMs.push(performance.now() - at);
          submitted.set(runId, at);
        });
        await fleet.until(() => [...submitted.keys()].every((id) => offered.has(id)), 60_000, 'an offer for every run');
        return { submitted, submitMs };
      };
      // The same sequence once untimed first, as graphile-worker's side does: the server's code
      // compiled, its connections open and its statements prepared, as on a live server.
      env.progress(`latency: warm-up, ${sizes.latencyRuns} single-step runs submitted ${sizes.latencySpacingMs} ms apart, untimed`);
      await sequence('latency-warm');
      await fleet.until((c) => c.parked >= sizes.latencyRunners && c.completed >= sizes.latencyRuns, 30_000, 'every runner parked again');
      env.progress(`latency: ${sizes.latencyRuns} single-step runs submitted ${sizes.latencySpacingMs} ms apart to ${sizes.latencyRunners} parked runners`);
      const { submitted, submitMs } = await sequence('latency');
      await fleet.until((c) => c.completed >= 2 * sizes.latencyRuns, 30_000, 'every completion');
      // The same sequence behind entries no runner can take, in every lane (the plain runs are
      // bulk): once the ticks have set them aside, they must cost the plain runs nothing.
      env.progress(`latency: ${sizes.latencyBlocked.toLocaleString('en-US')} entries no runner can take queued across the lanes`);
      await prequeue(d.pool, { entries: sizes.latencyBlocked, stepsPerRun: 50, label: 'latency-blocked', requirement: { labels: ['no-runner-has-this'] } });
      await queueNotify(d.pool);
      const asideAt = performance.now();
      await waitUntil(async () => (await d.pool.query(`SELECT count(*)::int AS n FROM queue_ready WHERE blocked_on IS NULL`)).rows[0].n === 0, 300_000, 'every unplaceable entry set aside');
      const asideMs = performance.now() - asideAt;
      env.progress(`latency: ${sizes.latencyRuns} single-step runs behind them`);
      const behind = await sequence('latency-behind');
      await fleet.until((c) => c.completed >= 3 * sizes.latencyRuns, 30_000, 'every completion');
      await fleet.stop();
      const behindSamples = [...behind.submitted].map(([id, at]) => offered.get(id)! - at);
      const blocked = figure({ scenario: 'latency', metric: `submit→offer p50 behind ${sizes.latencyBlocked.toLocaleString('en-US')} unplaceable entries (ms)`, value: percentile(behindSamples, 50), unit: 'ms', baseline: base.p50Ms, better: 'lower', target: '≤ graphile-worker p50' });
      blocked.met = blocked.ratio !== null && blocked.ratio <= 1;
      blocked.note = `set aside by the ticks in ${round(asideMs / 1000, 3)} s; p99 behind them ${round(percentile(behindSamples, 99), 3)} ms`;
      const samples = [...submitted].map(([id, at]) => offered.get(id)! - at);
      const p50 = figure({ scenario: 'latency', metric: 'submit→offer p50', value: percentile(samples, 50), unit: 'ms', baseline: base.p50Ms, better: 'lower', target: '≤ graphile-worker p50' });
      p50.met = p50.ratio !== null && p50.ratio <= 1;
      const p99 = figure({ scenario: 'latency', metric: 'submit→offer p99', value: percentile(samples, 99), unit: 'ms', baseline: base.p99Ms, better: 'lower', target: '≤ 2× graphile-worker p99' });
      p99.met = p99.ratio !== null && p99.ratio <= 2;
      const max = figure({ scenario: 'latency', metric: 'submit→offer max', value: Math.max(...samples), unit: 'ms', baseline: base.maxMs, better: 'lower' });
      // The split: how much of it is the submit transaction itself (commit is what wakes the dispatcher).
      const call = figure({ scenario: 'latency', metric: 'submit call (run + steps + enqueue committed) p50', value: percentile(submitMs, 50), unit: 'ms', better: 'lower' });
      this.notes.push(`latency: runner cycle: ${fleet.cycleSummary()}`);
      return [p50, p99, max, call, blocked];
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
    const f = figure({ scenario: 'replicas', metric: `steps/s (${r.steps} steps, ${env.sizes.replicas} replicas, ${env.sizes.runners} runners)`, value: r.stepsPerSecond, unit: 'steps/s', baseline: base.jobsPerSecond, better: 'higher' });
    if (!one) {
      f.note = 'run with the throughput scenario to compare with one replica';
      return [f];
    }
    f.note = `1 replica: ${round(one.stepsPerSecond)} steps/s; ${r.errors} retried errors (5xx or transport)`;
    // The target is against one replica of the same run, so it is a figure of its own: repeated
    // rounds then show its median and how many rounds met it, not a ratio to graphile-worker.
    const vsOne = figure({ scenario: 'replicas', metric: `${env.sizes.replicas} replicas vs 1 replica`, value: (r.stepsPerSecond / one.stepsPerSecond) * 100, unit: '%', better: 'higher', target: '≥ 100%, no 5xx' });
    vsOne.met = r.stepsPerSecond >= one.stepsPerSecond && r.errors === 0;
    vsOne.note = `${r.errors} retried errors (5xx or transport)`;
    return [f, vsOne];
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

  /**
   * An idle estate: runners long-polling one replica with nothing queued. What it costs per
   * second: the store's statements and CPU, and the server's CPU.
   */
  private async idleFigures(): Promise<Figure[]> {
    const { env } = this;
    const { sizes } = env;
    const d = await this.deploy('idle', 1);
    try {
      const fleet = this.fleet(d, sizes.idleRunners, 1, { namePrefix: 'idle', waitMs: sizes.idleWaitMs });
      env.progress(`idle: ${sizes.idleRunners} runners polling with wait_ms ${sizes.idleWaitMs}, nothing queued`);
      await fleet.register();
      fleet.start();
      await fleet.until((c) => c.parked >= sizes.idleRunners, 60_000, 'every runner parked');
      // One poll window first: every runner is in its cycle of parking, answered empty, parking again.
      await new Promise((r) => setTimeout(r, sizes.idleWaitMs));
      // The statement notes then count the sample, not the registrations before it.
      await statsReset(env.pg, d.db);
      const server = d.servers[0];
      const c0 = await costSnapshot(env.pg, d.db.name);
      const cpu0 = server.cpuMs();
      const polls0 = fleet.counters.acquires;
      await new Promise((r) => setTimeout(r, sizes.idleSampleMs));
      const c1 = await costSnapshot(env.pg, d.db.name);
      const cpu1 = server.cpuMs();
      const polls = fleet.counters.acquires - polls0;
      await fleet.stop();
      if (fleet.counters.offers > 0) this.notes.push(`idle: ${fleet.counters.offers} offers were made with nothing queued`);
      const frequent = await topStatements(env.pg, d.db.name, 6, 'calls');
      this.notes.push(`idle: most frequent statements (calls/s): ${frequent.map((t) => `${round(t.calls / (sizes.idleSampleMs / 1000), 3)} ${t.query.slice(0, 70)}`).join(' | ')}`);
      const cost = costDelta(c0, c1);
      const perSec = (v: number | null) => (v === null ? null : v / (sizes.idleSampleMs / 1000));
      const label = `${sizes.idleRunners} runners, wait_ms ${sizes.idleWaitMs}`;
      const out = [figure({ scenario: 'idle', metric: `idle: polls/s (${label})`, value: perSec(polls)!, unit: 'polls/s', better: 'higher' })];
      for (const [metric, v, unit] of [
        ['idle: statements/s', perSec(cost.calls), 'calls'],
        ['idle: DB process CPU ms/s', perSec(cost.cpuMs), 'ms'],
        ['idle: opschain server CPU ms/s', perSec(cpu0 === null || cpu1 === null ? null : cpu1 - cpu0), 'ms'],
      ] as Array<[string, number | null, string]>) {
        if (v !== null) out.push(figure({ scenario: 'idle', metric, value: v, unit, better: 'lower' }));
      }
      return out;
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
    const push = (metric: string, v: number | null, b: number | null, unit: string, target?: string, met?: (f: Figure) => boolean) => {
      if (v === null) return;
      const f = figure({ scenario: 'store-cost', metric, value: v, unit, baseline: b, better: 'lower', target });
      if (target) f.met = met ? met(f) : f.ratio !== null && f.ratio <= 2;
      out.push(f);
    };
    push('DB exec ms/step (submit + drain)', per(total.execMs, t.steps), per(baseTotal.execMs, base.jobs), 'ms', '≤ 2× graphile-worker');
    push('WAL bytes/step (submit + drain)', per(total.walBytes, t.steps), per(baseTotal.walBytes, base.jobs), 'B', '≤ 2× graphile-worker');
    push('DB process CPU ms/step (submit + drain)', per(total.cpuMs, t.steps), per(baseTotal.cpuMs, base.jobs), 'ms', '≤ 4× graphile-worker', (f) => f.ratio !== null && f.ratio <= 4);
    push('DB exec ms/step (drain only)', per(t.drainCost.execMs, t.steps), per(base.drainCost.execMs, base.jobs), 'ms');
    push('WAL bytes/step (drain only)', per(t.drainCost.walBytes, t.steps), per(base.drainCost.walBytes, base.jobs), 'B');
    push('DB process CPU ms/step (drain only)', per(t.drainCost.cpuMs, t.steps), per(base.drainCost.cpuMs, base.jobs), 'ms');
    // The whole CPU budget of a drained step on this machine: where the cores go.
    push('opschain server CPU ms/step (drain)', per(t.serverCpuMs, t.steps), null, 'ms');
    push('simulated fleet CPU ms/step (drain, bench process)', per(t.fleetCpuMs, t.steps), null, 'ms');
    push('statements/step (submit + drain)', per(total.calls, t.steps), per(baseTotal.calls, base.jobs), 'calls', '≤ 0.25', (f) => f.value <= 0.25);
    // The same workload created as graphile-worker creates its jobs here: in batches (runSubmitMany,
    // 100 runs of 10 steps per call, against addJobs' 5,000 jobs per call). A call per run costs a
    // commit and two round trips per run; this shows the per-step cost without them.
    const bulk = await this.drain('store-cost-bulk', 1, { runners: env.sizes.runners, slots: env.sizes.runnerSlots, bulk: 100 });
    const bulkTotal = costSum(bulk.submitCost, bulk.drainCost);
    push('DB exec ms/step (bulk submit + drain)', per(bulkTotal.execMs, bulk.steps), per(baseTotal.execMs, base.jobs), 'ms');
    push('WAL bytes/step (bulk submit + drain)', per(bulkTotal.walBytes, bulk.steps), per(baseTotal.walBytes, base.jobs), 'B', '≤ 2× graphile-worker');
    push('DB process CPU ms/step (bulk submit + drain)', per(bulkTotal.cpuMs, bulk.steps), per(baseTotal.cpuMs, base.jobs), 'ms', '≤ 4× graphile-worker', (f) => f.ratio !== null && f.ratio <= 4);
    push('statements/step (bulk submit + drain)', per(bulkTotal.calls, bulk.steps), per(baseTotal.calls, base.jobs), 'calls', '≤ 0.25', (f) => f.value <= 0.25);
    for (const s of t.top.slice(0, 8)) {
      this.notes.push(`top statement (opschain throughput): ${round(s.totalMs)} ms total, ${s.calls} calls, ${round(s.meanMs)} ms/call, ${s.rows} rows: ${s.query}`);
    }
    for (const [phase, wal] of [['add', base.wal.add], ['drain', base.wal.drain]] as const) {
      if (wal.length > 0) this.notes.push(`graphile-worker: WAL bytes/job of the ${phase} by relation (of which full-page images): ${walSharesNote(wal, base.jobs, 8)}`);
    }
    for (const s of base.top.slice(0, 5)) {
      this.notes.push(`top statement (graphile-worker): ${round(s.totalMs)} ms total, ${s.calls} calls, ${round(s.meanMs)} ms/call, ${s.rows} rows: ${s.query}`);
    }
    return out;
  }
}

/**
 * How a drain's work fell over the replicas: the shards each held, the measured fleet's steps
 * finished by the runners parked on it, and the span of those steps. A replica whose shards hold
 * more of the work finishes last while the others' runners wait.
 */
async function replicaShares(pool: Pool): Promise<string> {
  const { rows } = await pool.query(
    `SELECT r.last_replica AS replica, count(*)::int AS steps,
            extract(epoch FROM max(s.finished_at) - min(s.started_at))::float8 AS span,
            (SELECT count(*)::int FROM coordination_leases c WHERE c.name LIKE 'shard:%' AND c.holder = r.last_replica) AS shards
       FROM steps s JOIN runners r ON r.id = s.runner_id
      WHERE r.name LIKE 'sim%'
      GROUP BY r.last_replica ORDER BY steps DESC`,
  );
  const total = rows.reduce((n, r) => n + r.steps, 0);
  return rows.map((r) => `${r.shards} shards, ${r.steps} steps (${round((100 * r.steps) / total, 3)}%), ${round(r.span, 3)} s`).join('; ');
}

