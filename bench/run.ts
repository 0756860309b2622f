#!/usr/bin/env node
/**
 * `npm run bench`: opschain's dispatch plane measured against graphile-worker on the same
 * PostgreSQL in the same run. Markdown table on stderr, one JSON line per figure on stdout
 * (with --repeat, every round's and then the medians over the rounds).
 */
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { performance } from 'node:perf_hooks';
import { ArgsError, parseArgs, sizesFor, USAGE, type BenchArgs } from './args.js';
import { Baseline, baselineFigures } from './baseline.js';
import { OpschainBench } from './opschain.js';
import { Databases, prepareStatements, startBenchPostgres, type BenchPostgres } from './pg.js';
import { onCleanup, runCleanups } from './procs.js';
import { figureJson, markdownTable, repeatedJson, repeatedTable, round, summariseRounds, type Figure } from './stats.js';

const started = performance.now();
function progress(msg: string): void {
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1).padStart(6)}s] ${msg}\n`);
}

function machine(pg: BenchPostgres): string {
  return `machine: ${cpus().length} CPU (${cpus()[0]?.model.trim() ?? 'unknown'}), ${round(totalmem() / 2 ** 30, 3)} GiB RAM, node ${process.version}, PostgreSQL ${pg.version}${pg.embedded ? ' (embedded)' : ''}${pg.statements ? ', pg_stat_statements loaded' : ', no pg_stat_statements: DB exec time not measured'}`;
}

async function main(): Promise<number> {
  let args: BenchArgs;
  try {
    args = parseArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof ArgsError) {
      process.stderr.write(`${err.message}\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (args.help) {
    process.stderr.write(USAGE);
    return 0;
  }
  const sizes = { ...sizesFor(args.quick), ...(args.stepsPerRun ? { stepsPerRun: args.stepsPerRun } : {}), ...(args.fleetRunners ? { fleetRunners: args.fleetRunners } : {}) };
  progress(`scenarios: ${args.scenarios.join(', ')}${args.quick ? ' (quick)' : ''}`);
  const starting = startBenchPostgres({ databaseUrl: args.databaseUrl, log: progress });
  // Registered before the start resolves, so a Ctrl-C during initdb still stops the cluster.
  onCleanup(async () => (await starting.catch(() => undefined))?.stop());
  const pg = await starting;
  const dbs = new Databases(pg);
  onCleanup(() => dbs.dropAll());
  await prepareStatements(pg);
  progress(machine(pg));

  const rounds: Figure[][] = [];
  const notes: string[] = [];
  const failures: string[] = [];
  for (let r = 1; r <= args.repeat; r++) {
    const round = args.repeat > 1 ? ` (round ${r} of ${args.repeat})` : '';
    if (round) progress(`round ${r} of ${args.repeat}`);
    // Each round measures its own baseline: its ratios compare figures taken minutes apart, not an hour.
    const baseline = new Baseline(pg, dbs, sizes, progress);
    const opschain = new OpschainBench({ pg, dbs, args, sizes, progress, baseline });
    const figures: Figure[] = [];
    for (const scenario of args.scenarios) {
      const t0 = performance.now();
      try {
        figures.push(...(await opschain.scenario(scenario)));
        progress(`${scenario}: done in ${((performance.now() - t0) / 1000).toFixed(1)} s${round}`);
      } catch (err) {
        failures.push(`${scenario}${round}: ${(err as Error).message}`);
        progress(`${scenario}: FAILED${round}: ${(err as Error).stack ?? (err as Error).message}`);
      }
    }
    const measured = await baseline.measured();
    rounds.push([...baselineFigures(measured.throughput, measured.latency), ...figures]);
    notes.push(...opschain.notes.map((n) => (round ? `${n}${round}` : n)));
  }
  const lines = rounds.flatMap((figures, i) => figures.map((f) => (args.repeat > 1 ? figureJson(f, i + 1) : figureJson(f))));
  const repeated = args.repeat > 1 ? summariseRounds(rounds) : [];
  lines.push(...repeated.map(repeatedJson));
  process.stdout.write(lines.map((l) => `${l}\n`).join(''));
  if (args.out) writeFileSync(args.out, lines.join('\n') + '\n');
  process.stderr.write(`\n${machine(pg)}\n\n`);
  if (args.repeat > 1) {
    rounds.forEach((figures, i) => process.stderr.write(`round ${i + 1} of ${args.repeat}:\n\n${markdownTable(figures)}\n\n`));
    process.stderr.write(`over ${args.repeat} rounds:\n\n${repeatedTable(repeated)}\n\n`);
  } else {
    process.stderr.write(`${markdownTable(rounds[0])}\n\n`);
  }
  for (const note of notes) process.stderr.write(`note: ${note}\n`);
  for (const f of failures) process.stderr.write(`failed: ${f}\n`);
  return failures.length ? 1 : 0;
}

let exiting: Promise<never> | undefined;
/** The first caller's exit code wins; later callers (a scenario failing because a signal cut its pool) wait for the same cleanup. */
function shutdown(code: number): Promise<never> {
  return (exiting ??= runCleanups().then(() => process.exit(code)));
}

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (exiting) return;
    progress(`${sig}: stopping every process the bench started`);
    void shutdown(130);
  });
}

for (const event of ['uncaughtException', 'unhandledRejection'] as const) {
  process.on(event, (err) => {
    progress(`${event}: ${(err as Error)?.stack ?? err}`);
    void shutdown(1);
  });
}

main().then(
  (code) => shutdown(code),
  (err) => {
    progress(`bench failed: ${(err as Error).stack ?? err}`);
    return shutdown(1);
  },
);

