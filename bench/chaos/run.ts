#!/usr/bin/env node
/**
 * `npm run chaos`: three replicas and twenty runners on one PostgreSQL under a seeded storm of
 * faults, then heal, drain, and check the histories. Prints a report; exits 1 on any violation.
 * The seed reproduces the schedule and the workload: rerun a failing seed with `--seed N`.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDuration } from '../../src/core/duration.js';
import { ensureLibfaketime } from '../faketime.js';
import { startBenchPostgres, withDatabase } from '../pg.js';
import { onCleanup, runCleanups } from '../procs.js';
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
                    instead of an embedded PostgreSQL started for the run
  --keep            keep the scratch directory (histories, side effects, logs)
`;

export interface ChaosArgs { seed: number; durationMs: number; steps: number; replicas: number; runners: number; databaseUrl?: string; keep: boolean; help: boolean }

export class ChaosArgsError extends Error {}

export function parseChaosArgs(argv: readonly string[]): ChaosArgs {
  const a: ChaosArgs = { seed: randomBytes(4).readUInt32BE(0) % 1_000_000, durationMs: 300_000, steps: 30_000, replicas: 3, runners: 20, keep: false, help: false };
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
/** Steps kept open while submitting: enough to keep every runner busy, few enough to drain after the storm. */
const BACKLOG = 600;
const started = Date.now();
const log = (m: string) => process.stderr.write(`[chaos ${((Date.now() - started) / 1000).toFixed(1).padStart(6)}s] ${m}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function describe(f: Fault): string {
  const what = f.kind === 'lost-reply' ? `lost ${f.path} reply via replica ${f.target}` : f.kind.startsWith('runner') ? `${f.kind} runner ${f.target}` : f.kind.startsWith('replica') || f.kind === 'clock-skew' ? `${f.kind} replica ${f.target}${f.skewSeconds ? ` (${f.skewSeconds}s)` : ''}` : f.kind;
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
  const starting = startBenchPostgres({ databaseUrl: args.databaseUrl, log });
  onCleanup(async () => (await starting.catch(() => undefined))?.stop());
  const pg = await starting;
  const dbName = `chaos_${randomBytes(4).toString('hex')}`;
  await pg.admin.query(`CREATE DATABASE ${dbName}`);
  onCleanup(async () => {
    await pg.admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
  });

  const faketime = ensureLibfaketime(log);
  if ('reason' in faketime) log(`clock-skew faults will be skipped: ${faketime.reason}`);
  const cluster = new ChaosCluster({ databaseUrl: withDatabase(pg.adminUrl, dbName), dir, replicas: args.replicas, runners: args.runners, leaseTtlMs: LEASE_TTL_MS, pollWindowMs: 10_000, libfaketime: faketime.lib, log });
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
      const open = await cluster.openSteps().catch(() => -1);
      log(`${cluster.counters.submittedSteps} steps submitted, ${open} open, ${cluster.counters.retriedRuns} run retries, faults so far ${JSON.stringify(cluster.counters.faults)}`);
    }
  })();

  // Faults that take a replica away run one after the other, so one replica is always up.
  let replicaChain: Promise<unknown> = Promise.resolve();
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
  const report = await cluster.finish(schedule.some((f) => f.kind === 'runner-pause'));

  const faultsApplied = Object.entries(cluster.counters.faults).map(([k, n]) => `${k} ${n}`).join(', ');
  const header = [
    `opschain chaos: seed ${args.seed}, storm ${args.durationMs / 1000}s, ${args.replicas} replicas, ${args.runners} runners, lease TTL ${LEASE_TTL_MS / 1000}s, staleness ${STALENESS_MS / 1000}s`,
    `store                 PostgreSQL ${pg.version}${pg.embedded ? ' (embedded)' : ''}`,
    `workload              ${cluster.counters.submittedRuns} runs (DAGs, fan-outs, pooled, pinned), ${cluster.counters.submittedSteps} steps, ${cluster.counters.retriedRuns} run retries after runner_lost`,
    `faults applied        ${faultsApplied}`,
    `replica restarts      ${cluster.counters.replicaStartRetries} start(s) that exited on a store fault and were started again`,
    ...cluster.counters.skipped.map((s) => `skipped               ${s}`),
    `re-offer samples      ${report.reoffer.samplesMs.map((ms) => `${(ms / 1000).toFixed(1)}s`).join(', ') || 'none'}`,
    `wall time             ${((Date.now() - started) / 1000).toFixed(0)}s`,
  ];
  process.stdout.write(`${formatReport(report, header)}\n`);
  process.stdout.write(`${JSON.stringify({ seed: args.seed, durationMs: args.durationMs, runs: cluster.counters.submittedRuns, steps: report.steps, succeeded: report.succeeded, executions: report.executions, completions: report.completions, lost: report.lost.length, duplicatedCompletions: report.duplicatedCompletions.length, overlappingLeases: report.overlappingLeases.length, doubleExecutions: report.doubleExecutions.length, fencedStaleWrites: report.fencedStaleWrites, reofferMaxMs: report.reoffer.maxMs, reofferP99Ms: report.reoffer.p99Ms, faults: cluster.counters.faults, violations: report.violations })}\n`);
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
