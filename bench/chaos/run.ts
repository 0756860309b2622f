#!/usr/bin/env node
/**
 * `npm run chaos`: three replicas and twenty runners under a seeded storm of faults, then heal,
 * drain, and check the histories. The store is what operators run: a primary with a synchronous
 * standby behind one address (the failover fault kills the primary and promotes the standby),
 * reached through PgBouncer in transaction mode (restarted as a fault). Without the PostgreSQL
 * server binaries or PgBouncer, or with --database-url, it runs on one server and says which
 * faults it left out. Prints a report; exits 1 on any violation. The seed reproduces the
 * schedule and the workload: rerun a failing seed with `--seed N`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDuration } from '../../src/core/duration.js';
import { ensureLibfaketime } from '../faketime.js';
import { startBenchPostgres, withDatabase } from '../pg.js';
import { PgPair, pgBinaries } from '../pg-pair.js';
import { PgBouncer, pgbouncerBinary } from '../pgbouncer.js';
import { onCleanup, runCleanups } from '../procs.js';
import { createPool } from '../../src/store/pool.js';
import { formatReport } from './checker.js';
import { ChaosCluster } from './harness.js';
import { faultSchedule, rng, runDefinition, type Fault } from './schedule.js';

export const CHAOS_USAGE = `usage: npm run chaos -- [--seed N] [--duration 5m] [--steps N] [--replicas 3] [--runners 20] [--database-url URL] [--keep]

  --seed N          the storm's seed (default: random, printed): faults, targets, timings and workload
  --duration D      how long the storm lasts (default 5m); healing and draining come after
  --steps N         submit at most this many steps (default 30000)
  --replicas N      opschain server processes (default 3)
  --runners N       opschain runner processes (default 20)
  --database-url U  a PostgreSQL superuser URL (the chaos database is created and dropped there)
                    instead of a primary and synchronous standby (behind PgBouncer) started for
                    the run from the machine's PostgreSQL binaries; no failover or PgBouncer faults
  --executor E      bench (default): runners run workload steps in-process, so the step process
                    does not bound the rate; shell: each step forks /bin/sh -c
  --keep            keep the scratch directory (histories, side effects, logs)
`;

export interface ChaosArgs { executor: 'bench' | 'shell'; seed: number; durationMs: number; steps: number; replicas: number; runners: number; databaseUrl?: string; keep: boolean; help: boolean }

export class ChaosArgsError extends Error {}

export function parseChaosArgs(argv: readonly string[]): ChaosArgs {
  const a: ChaosArgs = { executor: 'bench', seed: randomBytes(4).readUInt32BE(0) % 1_000_000, durationMs: 300_000, steps: 30_000, replicas: 3, runners: 20, keep: false, help: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, inline] = argv[i].includes('=') ? [argv[i].slice(0, argv[i].indexOf('=')), argv[i].slice(argv[i].indexOf('=') + 1)] : [argv[i], undefined];
    const take = (): string => {
      if (inline !== undefined) return inline;
      const v = argv[++i];
      if (v === undefined || v.startsWith('--')) throw new ChaosArgsError(`${flag} needs a value`);
      return v;
    };
    const int = (name: string, min: number): number => {
      const v = take();
      if (!/^\d+$/.test(v) || Number(v) < min) throw new ChaosArgsError(`${name} ${v}: expected a whole number ≥ ${min}`);
      return Number(v);
    };
    switch (flag) {
      case '--seed':
        a.seed = int('--seed', 0);
        break;
      case '--duration': {
        const v = take();
        const ms = parseDuration(v);
        if (ms === undefined || ms < 10_000) throw new ChaosArgsError(`--duration ${v}: expected a duration of at least 10s, like 90s or 5m`);
        a.durationMs = ms;
        break;
      }
      case '--steps':
        a.steps = int('--steps', 1);
        break;
      case '--replicas':
        a.replicas = int('--replicas', 2);
        break;
      case '--runners':
        a.runners = int('--runners', 1);
        break;
      case '--database-url':
        a.databaseUrl = take();
        break;
      case '--executor': {
        const v = take();
        if (v !== 'bench' && v !== 'shell') throw new ChaosArgsError(`--executor ${v}: expected bench or shell`);
        a.executor = v;
        break;
      }
      case '--keep':
        a.keep = true;
        break;
      case '--help':
      case '-h':
        a.help = true;
        break;
      default:
        throw new ChaosArgsError(`unknown argument ${argv[i]}`);
    }
  }
  return a;
}

const LEASE_TTL_MS = 20_000;
const STALENESS_MS = 15_000;
/**
 * Steps kept open while submitting: enough to keep every runner busy while a killed or frozen
 * replica's shards wait for their new owner (their entries pile up for up to 22 s and must not use
 * up the backlog the other shards' runners draw on), few enough to drain after the storm.
 */
const BACKLOG = 1_500;
const started = Date.now();
const log = (m: string) => process.stderr.write(`[chaos ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface ChaosStore {
  /** The chaos database, reached the way the harness reads it (the one address of the pair). */
  url: string;
  pair?: PgPair;
  bouncer?: PgBouncer;
  describe: string;
  skipped: string[];
}

/**
 * The store of the run: with the machine's PostgreSQL server binaries, a primary and a synchronous
 * standby behind one address, and PgBouncer in transaction mode in front of it when installed;
 * otherwise (or with --database-url) one server, the faults it cannot offer named.
 */
async function startStore(databaseUrl: string | undefined): Promise<ChaosStore> {
  const skipped: string[] = [];
  const bins = databaseUrl ? { missing: 'the store is the --database-url server' } : pgBinaries();
  const bouncerBin = pgbouncerBinary();
  if ('dir' in bins) {
    log(`starting a PostgreSQL primary with a synchronous standby from ${bins.dir}`);
    const starting = PgPair.start(bins.dir, { database: `chaos_${randomBytes(4).toString('hex')}` });
    onCleanup(async () => (await starting.catch(() => undefined))?.stop());
    const pair = await starting;
    const version = (await storeVersion(pair.url)) ?? '?';
    let bouncer: PgBouncer | undefined;
    if ('path' in bouncerBin) {
      bouncer = new PgBouncer(bouncerBin.path, pair.url, 'transaction');
      onCleanup(() => bouncer!.stop());
      await bouncer.start();
    } else skipped.push(`PgBouncer restarts skipped: ${bouncerBin.missing}`);
    return { url: pair.url, pair, bouncer, skipped, describe: `PostgreSQL ${version}, primary + synchronous standby behind one address${bouncer ? ', replicas through PgBouncer (transaction mode), LISTEN direct' : ''}` };
  }
  skipped.push(`primary failover skipped: ${bins.missing}`, `PgBouncer restarts skipped: ${'path' in bouncerBin ? 'they need the primary and standby the run starts itself' : bouncerBin.missing}`);
  const starting = startBenchPostgres({ databaseUrl, log });
  onCleanup(async () => (await starting.catch(() => undefined))?.stop());
  const pg = await starting;
  const dbName = `chaos_${randomBytes(4).toString('hex')}`;
  await pg.admin.query(`CREATE DATABASE ${dbName}`);
  onCleanup(async () => {
    await pg.admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
  });
  return { url: withDatabase(pg.adminUrl, dbName), skipped, describe: `PostgreSQL ${pg.version}${pg.embedded ? ' (embedded)' : ''}, one server` };
}

async function storeVersion(url: string): Promise<string | undefined> {
  const pool = createPool(url, { max: 1 });
  try {
    return (await pool.query(`SELECT current_setting('server_version') AS v`)).rows[0].v;
  } catch {
    return undefined;
  } finally {
    await pool.end().catch(() => {});
  }
}

function describe(f: Fault): string {
  const skew = f.skewSeconds ? ` (${f.skewSeconds}s)` : '';
  const what = f.kind === 'lost-reply' ? `lost ${f.path} reply via replica ${f.target}` : f.kind.startsWith('runner') ? `${f.kind} runner ${f.target}${skew}` : f.kind.startsWith('replica') || f.kind === 'clock-skew' ? `${f.kind} replica ${f.target}${skew}` : f.kind;
  return `${(f.at / 1000).toFixed(0).padStart(4)}s ${what}${f.durationMs ? ` for ${(f.durationMs / 1000).toFixed(1)}s` : ''}`;
}

async function main(): Promise<number> {
  let args: ChaosArgs;
  try {
    args = parseChaosArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof ChaosArgsError) {
      process.stderr.write(`${err.message}\n${CHAOS_USAGE}`);
      return 2;
    }
    throw err;
  }
  if (args.help) {
    process.stderr.write(CHAOS_USAGE);
    return 0;
  }
  log(`seed ${args.seed}: reproduce with npm run chaos -- --seed ${args.seed} --duration ${args.durationMs / 1000}s --steps ${args.steps}`);
  const dir = mkdtempSync(join(tmpdir(), 'opschain-chaos-'));
  onCleanup(async () => {
    if (!args.keep) rmSync(dir, { recursive: true, force: true });
    else log(`kept ${dir}`);
  });
  const store = await startStore(args.databaseUrl);
  const { pair, bouncer } = store;
  for (const s of store.skipped) log(s);

  const faketime = ensureLibfaketime(log);
  if ('reason' in faketime) log(`clock-skew faults will be skipped: ${faketime.reason}`);
  // In-process steps cost a runner nothing: more of them at once keep the dispatch plane, not the
  // round trips of a loaded machine, the bound.
  const cluster = new ChaosCluster({ databaseUrl: store.url, replicaStoreUrl: bouncer?.url, pair, bouncer, dir, replicas: args.replicas, runners: args.runners, leaseTtlMs: LEASE_TTL_MS, pollWindowMs: 10_000, libfaketime: faketime.lib, benchExecutor: args.executor === 'bench', maxParallelSteps: args.executor === 'bench' ? 8 : 4, log });
  for (const s of store.skipped) cluster.counters.skipped.push(s);
  onCleanup(() => cluster.stop());
  log(`starting ${args.replicas} replicas and ${args.runners} runners (lease TTL ${LEASE_TTL_MS / 1000}s, staleness ${STALENESS_MS / 1000}s)`);
  await cluster.start();

  const schedule = faultSchedule({ seed: args.seed, durationMs: args.durationMs, replicas: args.replicas, runners: args.runners, stalenessMs: STALENESS_MS, leaseTtlMs: LEASE_TTL_MS });
  log(`fault schedule (${schedule.length}):\n${schedule.map((f) => `    ${describe(f)}`).join('\n')}`);

  const t0 = Date.now();
  const end = t0 + args.durationMs;
  let storming = true;
  const workload = rng(args.seed ^ 0x5eed);
  const submitter = (async () => {
    let n = 0;
    while (storming && cluster.counters.submittedSteps < args.steps) {
      try {
        if ((await cluster.openSteps()) < BACKLOG) {
          for (let i = 0; i < 10 && cluster.counters.submittedSteps < args.steps; i++) await cluster.submit(runDefinition(workload, ++n, cluster.side));
          continue;
        }
      } catch (err) {
        log(`submit failed (${(err as Error).message}); retrying`);
      }
      await sleep(250);
    }
  })();
  const retrier = (async () => {
    while (storming) {
      await cluster.retryErrored().catch(() => 0);
      await sleep(5_000);
    }
  })();
  const progress = (async () => {
    while (storming) {
      await sleep(15_000);
      if (!storming) break;
      const open = await cluster.openBreakdown().catch(() => undefined);
      const where = open ? `${open.waiting + open.queued + open.offered + open.executing} open (${open.waiting} waiting on needs, ${open.queued} queued (${open.queuedPooled} pooled, ${open.queuedRunScoped} run-scoped), ${open.offered} offered, ${open.executing} executing)` : 'open steps unknown (store unreachable)';
      log(`${cluster.counters.submittedSteps} steps submitted, ${where}, ${cluster.counters.retriedRuns} run retries, faults so far ${JSON.stringify(cluster.counters.faults)}`);
    }
  })();

  // Faults that take a replica away run one after the other, so one replica is always up; faults
  // of one runner too, so a kill and a skew never start two processes for one slot.
  let replicaChain: Promise<unknown> = Promise.resolve();
  const runnerChains = new Map<number, Promise<unknown>>();
  const faults = schedule.map(async (f) => {
    await sleep(Math.max(0, t0 + f.at - Date.now()));
    log(`fault: ${describe(f)}`);
    const run = async () => {
      switch (f.kind) {
        case 'replica-kill':
          return cluster.killReplica(f.target, f.durationMs);
        case 'replica-pause':
          return cluster.pauseReplica(f.target, f.durationMs);
        case 'clock-skew':
          return cluster.skewReplica(f.target, f.skewSeconds ?? 30, f.durationMs);
        case 'runner-skew':
          return cluster.skewRunner(f.target, f.skewSeconds ?? 90, f.durationMs);
        case 'store-failover':
          return cluster.failover();
        case 'pgbouncer-restart':
          return cluster.restartBouncer(f.durationMs);
        case 'runner-kill':
          return cluster.killRunner(f.target, f.durationMs);
        case 'runner-pause':
          return cluster.pauseRunner(f.target, f.durationMs);
        case 'pg-terminate':
          return log(`terminated ${await cluster.terminateConnections()} database connections`);
        case 'store-hang':
          return cluster.storeOutage('hang', f.durationMs);
        case 'store-refuse':
          return cluster.storeOutage('refuse', f.durationMs);
        case 'lost-reply':
          if (!(await cluster.loseReply(f.target, f.path!, 60_000))) log(`no ${f.path === 'ack' ? 'ack or renew' : f.path} call reached replica ${f.target} in 60 s: nothing lost`);
          return;
        case 'platform-halt':
          return cluster.halt(f.durationMs);
      }
    };
    const guarded = () => run().catch((err) => log(`fault ${f.kind} failed: ${(err as Error).message}`));
    if (f.kind === 'replica-kill' || f.kind === 'replica-pause' || f.kind === 'clock-skew') {
      replicaChain = replicaChain.then(guarded);
      await replicaChain;
    } else if (f.kind === 'runner-kill' || f.kind === 'runner-pause' || f.kind === 'runner-skew') {
      const chain = (runnerChains.get(f.target) ?? Promise.resolve()).then(guarded);
      runnerChains.set(f.target, chain);
      await chain;
    } else await guarded();
  });

  await sleep(Math.max(0, end - Date.now()));
  storming = false;
  log('storm over: waiting for the last faults to heal');
  await Promise.all(faults);
  await Promise.all([submitter, retrier, progress]);
  await cluster.heal();
  log(`healed; draining ${await cluster.openSteps()} open steps`);
  const drained = await cluster.drain(Math.max(300_000, args.durationMs));
  if (!drained) log('not every run finished within the drain bound: the unfinished steps are reported as lost');
  const stormEnded = Date.now() - t0;
  const report = await cluster.finish(schedule.some((f) => f.kind === 'runner-pause'));

  const faultsApplied = Object.entries(cluster.counters.faults).map(([k, n]) => `${k} ${n}`).join(', ');
  const header = [
    `opschain chaos: seed ${args.seed}, storm ${args.durationMs / 1000}s, ${args.replicas} replicas, ${args.runners} runners (steps run ${args.executor === "bench" ? "in-process by the bench executor" : "by /bin/sh"}), lease TTL ${LEASE_TTL_MS / 1000}s, staleness ${STALENESS_MS / 1000}s`,
    `store                 ${store.describe}`,
    `workload              ${cluster.counters.submittedRuns} runs (DAGs, fan-outs, pooled, pinned), ${cluster.counters.submittedSteps} steps, ${cluster.counters.retriedRuns} run retries after runner_lost`,
    `faults applied        ${faultsApplied}`,
    `replica restarts      ${cluster.counters.replicaStartRetries} start(s) that exited on a store fault and were started again`,
    ...cluster.counters.skipped.map((s) => `skipped               ${s}`),
    `re-offer samples      ${report.reoffer.samplesMs.map((ms) => `${(ms / 1000).toFixed(1)}s`).join(', ') || 'none'}`,
    `store back → 1st step ${cluster.resumeMs.map((r) => `${r.fault} ${(r.ms / 1000).toFixed(2)}s`).join(', ') || 'none'}`,
    `step rate             ${(report.succeeded / (stormEnded / 1000)).toFixed(1)} steps/s over the storm and its drain (${report.succeeded} in ${(stormEnded / 1000).toFixed(0)}s)`,
    `wall time             ${((Date.now() - started) / 1000).toFixed(0)}s`,
  ];
  process.stdout.write(`${formatReport(report, header)}\n`);
  process.stdout.write(`${JSON.stringify({ seed: args.seed, durationMs: args.durationMs, runs: cluster.counters.submittedRuns, steps: report.steps, succeeded: report.succeeded, executions: report.executions, completions: report.completions, lost: report.lost.length, duplicatedCompletions: report.duplicatedCompletions.length, overlappingLeases: report.overlappingLeases.length, doubleExecutions: report.doubleExecutions.length, fencedStaleWrites: report.fencedStaleWrites, reofferMaxMs: report.reoffer.maxMs, reofferP99Ms: report.reoffer.p99Ms, reofferSamplesMs: report.reoffer.samplesMs, storeResumeMs: cluster.resumeMs, faults: cluster.counters.faults, violations: report.violations })}\n`);
  return report.violations.length === 0 ? 0 : 1;
}

let exiting = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (exiting) return;
    exiting = true;
    log(`${sig}: stopping every process`);
    void runCleanups().finally(() => process.exit(130));
  });
}

main()
  .then(async (code) => {
    await runCleanups();
    process.exit(code);
  })
  .catch(async (err) => {
    log(`chaos run failed: ${(err as Error).stack ?? err}`);
    await runCleanups();
    process.exit(1);
  });
