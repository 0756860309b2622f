import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { makeWorkerUtils, run, runMigrations, type Logger as GwLogger, type Runner, type WorkerUtils } from 'graphile-worker';
import { Logger } from 'graphile-worker';
import type { Sizes } from './args.js';
import { checkpoint, statsReset, costDelta, costSnapshot, costSum, topStatements, walByRelation, type BenchPostgres, type CostDelta, type TopStatement, type WalShare } from './pg.js';
import { paced } from './pace.js';
import { onCleanup } from './procs.js';
import { createPool, type Pool } from '../src/store/pool.js';
import { figure, percentile, perSecond, type Figure } from './stats.js';
import type { Databases } from './pg.js';

/**
 * The baseline: graphile-worker in this process, on the same PostgreSQL (its own database),
 * configured for throughput the way its docs recommend: a pool of concurrent jobs, a local
 * queue that locks a batch of jobs per fetch, and batched completion.
 */
export interface BaselineThroughput {
  jobs: number;
  ms: number;
  jobsPerSecond: number;
  addMs: number;
  addCost: CostDelta;
  drainCost: CostDelta;
  top: TopStatement[];
  /** WAL by relation of the add and the drain (empty without pg_walinspect). */
  wal: { add: WalShare[]; drain: WalShare[] };
}
export interface BaselineLatency { jobs: number; p50Ms: number; p99Ms: number; maxMs: number }

const quietLogger: GwLogger = new Logger(() => (level: string, message: string) => {
  if (level === 'error') process.stderr.write(`graphile-worker: ${message}\n`);
});

function workerPreset(sizes: Sizes) {
  return {
    worker: {
      localQueue: { size: sizes.baselineLocalQueue },
      completeJobBatchDelay: sizes.baselineCompleteBatchDelayMs,
      failJobBatchDelay: sizes.baselineCompleteBatchDelayMs,
    },
  };
}

/**
 * Our own pools (with error listeners) instead of graphile-worker's: a connection cut while the
 * bench stops must not surface as an unhandled 'error' event and take the process down first.
 */
function benchPool(url: string, max: number): Pool {
  const pool = createPool(url, { max, applicationName: 'graphile-worker-bench', statementTimeoutMs: 600_000, queryTimeoutMs: 600_000 });
  const unregister = onCleanup(() => pool.end().catch(() => {}));
  const end = pool.end.bind(pool);
  pool.end = (async () => {
    unregister();
    await end().catch(() => {});
  }) as Pool['end'];
  return pool;
}

async function withUtils<T>(url: string, fn: (u: WorkerUtils) => Promise<T>): Promise<T> {
  const pgPool = benchPool(url, 2);
  try {
    const utils = await makeWorkerUtils({ pgPool, logger: quietLogger });
    try {
      return await fn(utils);
    } finally {
      await utils.release();
    }
  } finally {
    await pgPool.end();
  }
}

async function startRunner(url: string, sizes: Sizes, events: EventEmitter, task: (payload: unknown) => void): Promise<Runner> {
  const pgPool = benchPool(url, sizes.baselineConcurrency + 2);
  const runner = await run({
    pgPool,
    noHandleSignals: true,
    concurrency: sizes.baselineConcurrency,
    pollInterval: 2_000,
    logger: quietLogger,
    events: events as any,
    preset: workerPreset(sizes) as any,
    taskList: { noop: async (payload) => task(payload) },
  });
  const unregister = onCleanup(() => runner.stop());
  const stop = runner.stop.bind(runner);
  runner.stop = async () => {
    unregister();
    await stop().catch(() => {});
    await pgPool.end();
  };
  return runner;
}

async function migrateBaseline(url: string): Promise<void> {
  const pgPool = benchPool(url, 1);
  try {
    await runMigrations({ pgPool, logger: quietLogger });
  } finally {
    await pgPool.end();
  }
}

async function jobsLeft(utils: WorkerUtils): Promise<number> {
  const { rows } = await utils.withPgClient((c) => c.query(`SELECT count(*)::int AS n FROM graphile_worker._private_jobs`));
  return rows[0].n;
}

/** Adds `n` no-op jobs, then lets the worker drain them; timed from the first job start to the last completion committed. */
export async function baselineThroughput(pg: BenchPostgres, db: { name: string; url: string }, n: number, sizes: Sizes, progress: (m: string) => void): Promise<BaselineThroughput> {
  await migrateBaseline(db.url);
  if (sizes.warmupSteps > 0) {
    progress(`graphile-worker: warm-up, ${sizes.warmupSteps} jobs drained untimed`);
    await drainJobs(db.url, sizes.warmupSteps, sizes);
    await statsReset(pg, db);
  }
  await checkpoint(pg);
  const c0 = await costSnapshot(pg, db.name);
  let addMs = 0;
  await withUtils(db.url, async (utils) => {
    const t0 = performance.now();
    await addNoopJobs(utils, n, 0);
    addMs = performance.now() - t0;
  });
  const c1 = await costSnapshot(pg, db.name);
  progress(`graphile-worker: ${n} jobs queued; draining with ${sizes.baselineConcurrency} concurrent jobs`);
  const events = new EventEmitter();
  let first = 0;
  let done = 0;
  let allRan: () => void = () => {};
  const ran = new Promise<void>((r) => (allRan = r));
  events.on('job:start', () => {
    if (!first) first = performance.now();
  });
  events.on('job:success', () => {
    if (++done === n) allRan();
  });
  const runner = await startRunner(db.url, sizes, events, () => {});
  try {
    await ran;
    // Completions are batched: a job counts once its completion is committed. Polled only
    // now, so the poll adds nothing to the worker's statement cost while it drains.
    await untilNoJobsLeft(db.url, 1, 600_000);
  } finally {
    await runner.stop();
  }
  const ms = performance.now() - first;
  if (done !== n) throw new Error(`graphile-worker ran ${done} jobs successfully, expected ${n}`);
  const c2 = await costSnapshot(pg, db.name);
  const wal = { add: await walByRelation(db.url, c0, c1), drain: await walByRelation(db.url, c1, c2) };
  return { jobs: n, ms, jobsPerSecond: perSecond(n, ms), addMs, addCost: costDelta(c0, c1), drainCost: costDelta(c1, c2), top: await topStatements(pg, db.name, 8), wal };
}

/** Adds `n` no-op jobs in batches of 5,000 (as addJobs is meant to be called), payloads numbered from `first`. */
async function addNoopJobs(utils: WorkerUtils, n: number, first: number): Promise<void> {
  for (let i = 0; i < n; i += 5_000) {
    await utils.addJobs(Array.from({ length: Math.min(5_000, n - i) }, (_, k) => ({ identifier: 'noop', payload: { i: first + i + k } })));
  }
}

/** Polls every `everyMs` until no job is left (completions are committed), failing after `limitMs`. */
async function untilNoJobsLeft(url: string, everyMs: number, limitMs: number): Promise<void> {
  await withUtils(url, async (utils) => {
    const deadline = performance.now() + limitMs;
    while ((await jobsLeft(utils)) > 0) {
      if (performance.now() > deadline) throw new Error(`graphile-worker: ${await jobsLeft(utils)} jobs left after ${Math.round(limitMs / 1000)} s`);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  });
}

/** Adds `n` no-op jobs and drains them with a worker of the baseline's settings (untimed): the warm-up before the measured drain. */
async function drainJobs(url: string, n: number, sizes: Sizes): Promise<void> {
  await withUtils(url, (utils) => addNoopJobs(utils, n, -n));
  const runner = await startRunner(url, sizes, new EventEmitter(), () => {});
  try {
    await untilNoJobsLeft(url, 5, 120_000);
  } finally {
    await runner.stop();
  }
}

/** An idle worker; jobs added one at a time `spacingMs` apart; add → task start. */
export async function baselineLatency(db: { url: string }, count: number, spacingMs: number, sizes: Sizes): Promise<BaselineLatency> {
  await migrateBaseline(db.url);
  const events = new EventEmitter();
  const listening = new Promise<void>((r) => events.once('pool:listen:success', () => r()));
  const submitted = new Map<number, number>();
  const latencies: number[] = [];
  let allStarted: () => void = () => {};
  const started = new Promise<void>((r) => (allStarted = r));
  const runner = await startRunner(db.url, sizes, events, (payload) => {
    const at = performance.now();
    const i = (payload as { i: number }).i;
    const t = submitted.get(i);
    if (t !== undefined) latencies.push(at - t);
    if (latencies.length === count) allStarted();
  });
  try {
    await listening;
    await withUtils(db.url, async (utils) => {
      // The same sequence once untimed first (jobs -count..-1), as opschain's side does: the
      // worker's code compiled, its connections open and its statement plans made, as on a live system.
      await paced(count, spacingMs, (i) => utils.addJob('noop', { i: i - count }).then(() => {}));
      await new Promise((r) => setTimeout(r, 200));
      await paced(count, spacingMs, async (i) => {
        submitted.set(i, performance.now());
        await utils.addJob('noop', { i });
      });
    });
    await Promise.race([started, new Promise((_, reject) => setTimeout(() => reject(new Error(`graphile-worker latency: only ${latencies.length}/${count} jobs started within 30 s`)), 30_000))]);
  } finally {
    await runner.stop();
  }
  return { jobs: count, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), maxMs: Math.max(...latencies) };
}

/** The baseline measured at most once per run, on first use, and shared by every scenario. */
export class Baseline {
  private throughputResult?: Promise<BaselineThroughput>;
  private latencyResult?: Promise<BaselineLatency>;
  constructor(private readonly pg: BenchPostgres, private readonly dbs: Databases, private readonly sizes: Sizes, private readonly progress: (m: string) => void) {}

  throughput(): Promise<BaselineThroughput> {
    return (this.throughputResult ??= (async () => {
      const db = await this.dbs.create('graphile_throughput');
      this.progress(`baseline: graphile-worker throughput, ${this.sizes.throughputSteps} no-op jobs`);
      return baselineThroughput(this.pg, db, this.sizes.throughputSteps, this.sizes, this.progress);
    })());
  }

  latency(): Promise<BaselineLatency> {
    return (this.latencyResult ??= (async () => {
      const db = await this.dbs.create('graphile_latency');
      this.progress(`baseline: graphile-worker latency, ${this.sizes.latencyRuns} jobs added ${this.sizes.latencySpacingMs} ms apart`);
      return baselineLatency(db, this.sizes.latencyRuns, this.sizes.latencySpacingMs, this.sizes);
    })());
  }

  /** The figures measured so far (a baseline that failed is left out; its scenario reports the failure). */
  async measured(): Promise<{ throughput?: BaselineThroughput; latency?: BaselineLatency }> {
    const settle = async <T>(p?: Promise<T>) => (p ? p.catch(() => undefined) : undefined);
    return { throughput: await settle(this.throughputResult), latency: await settle(this.latencyResult) };
  }
}

/** The baseline's own rows of the table. */
export function baselineFigures(t: BaselineThroughput | undefined, l: BaselineLatency | undefined): Figure[] {
  const out: Figure[] = [];
  if (t) {
    out.push(figure({ scenario: 'baseline', metric: `graphile-worker jobs/s (${t.jobs} jobs)`, value: t.jobsPerSecond, unit: 'jobs/s', better: 'higher' }));
    out.push(figure({ scenario: 'baseline', metric: `graphile-worker addJobs jobs/s (${t.jobs} jobs in batches of 5000)`, value: perSecond(t.jobs, t.addMs), unit: 'jobs/s', better: 'higher' }));
    const total = costSum(t.addCost, t.drainCost);
    if (total.execMs !== null) out.push(figure({ scenario: 'baseline', metric: 'graphile-worker DB exec ms/job (add + drain)', value: total.execMs / t.jobs, unit: 'ms', better: 'lower' }));
    out.push(figure({ scenario: 'baseline', metric: 'graphile-worker WAL bytes/job (add + drain)', value: total.walBytes / t.jobs, unit: 'B', better: 'lower' }));
    if (total.cpuMs !== null) out.push(figure({ scenario: 'baseline', metric: 'graphile-worker DB process CPU ms/job (add + drain)', value: total.cpuMs / t.jobs, unit: 'ms', better: 'lower' }));
  }
  if (l) {
    out.push(figure({ scenario: 'baseline', metric: 'graphile-worker add→start p50', value: l.p50Ms, unit: 'ms', better: 'lower' }));
    out.push(figure({ scenario: 'baseline', metric: 'graphile-worker add→start p99', value: l.p99Ms, unit: 'ms', better: 'lower' }));
  }
  return out;
}
