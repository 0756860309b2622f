/** Command-line flags of `npm run bench`. */

export const SCENARIOS = ['throughput', 'wide', 'dag', 'submit', 'floor', 'latency', 'depth', 'replicas', 'memory', 'idle', 'store-cost', 'console', 'triggers', 'startup', 'capacity', 'chain', 'fleet'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export interface BenchArgs {
  scenarios: ScenarioName[];
  quick: boolean;
  databaseUrl?: string;
  out?: string;
  /** Write a V8 CPU profile of each opschain server into this directory (`node --cpu-prof`). */
  cpuProfDir?: string;
  /** Steps per submitted run in the throughput and replicas workloads (default 10). */
  stepsPerRun?: number;
  /** Simulated runners of the fleet scenario's large fleet (default 10,000; 500 with --quick). */
  fleetRunners?: number;
  /** Rounds of the whole scenario list, each against its own graphile-worker baseline (default 1). */
  repeat: number;
  help: boolean;
}

export class ArgsError extends Error {}

export const USAGE = `usage: npm run bench -- [--scenario NAME[,NAME]]... [--quick] [--database-url URL] [--out FILE] [--cpu-prof DIR] [--repeat N]

  --scenario NAME   one of ${SCENARIOS.join(', ')} (repeatable or comma list; default all)
  --quick           small sizes, about a minute in all (CI smoke run)
  --database-url U  use this PostgreSQL (a superuser URL; the bench creates and drops its own databases)
                    instead of starting an embedded one
  --out FILE        also write the JSON lines to FILE
  --cpu-prof DIR    run the opschain servers with --cpu-prof, writing profiles into DIR
                    (summarise one with: node dist/bench/profile.js FILE.cpuprofile)
  --steps-per-run N runs of N independent steps in the throughput workloads (default 10)
  --fleet-runners N the fleet scenario's large fleet (default 10000, 500 with --quick); each runner
                    holds a socket here and one in the server, so the open-file hard limit must
                    exceed it (node raises its soft limit to the hard limit by itself)
  --repeat N        run the scenarios N times (1-9), each round against its own graphile-worker
                    baseline, and print the medians, each ratio's range and how many rounds met
                    each target
`;

export function parseArgs(argv: readonly string[]): BenchArgs {
  const args: BenchArgs = { scenarios: [], quick: false, repeat: 1, help: false };
  const value = (i: number, flag: string): string => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith('--')) throw new ArgsError(`${flag} needs a value`);
    return v;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const take = (): string => {
      if (inline !== undefined) return inline;
      const v = value(i, flag);
      i++;
      return v;
    };
    switch (flag) {
      case '--scenario':
      case '--scenarios':
        for (const name of take().split(',').map((s) => s.trim()).filter(Boolean)) {
          if (!(SCENARIOS as readonly string[]).includes(name)) throw new ArgsError(`--scenario: unknown scenario '${name}' (known: ${SCENARIOS.join(', ')})`);
          if (!args.scenarios.includes(name as ScenarioName)) args.scenarios.push(name as ScenarioName);
        }
        break;
      case '--quick':
        args.quick = true;
        break;
      case '--database-url':
        args.databaseUrl = take();
        if (!/^postgres(ql)?:\/\//.test(args.databaseUrl)) throw new ArgsError('--database-url: expected a postgres:// URL');
        break;
      case '--out':
        args.out = take();
        break;
      case '--cpu-prof':
        args.cpuProfDir = take();
        break;
      case '--steps-per-run': {
        const n = Number(take());
        if (!Number.isInteger(n) || n < 1 || n > 1000) throw new ArgsError('--steps-per-run: expected an integer 1-1000');
        args.stepsPerRun = n;
        break;
      }
      case '--fleet-runners': {
        const n = Number(take());
        if (!Number.isInteger(n) || n < 1 || n > 100_000) throw new ArgsError('--fleet-runners: expected an integer 1-100000');
        args.fleetRunners = n;
        break;
      }
      case '--repeat': {
        const n = Number(take());
        if (!Number.isInteger(n) || n < 1 || n > 9) throw new ArgsError('--repeat: expected an integer 1-9');
        args.repeat = n;
        break;
      }
      case '--help':
      case '-h':
        args.help = true;
        break;
      default:
        throw new ArgsError(`unknown argument '${a}'`);
    }
  }
  if (args.scenarios.length === 0) args.scenarios = [...SCENARIOS];
  else args.scenarios.sort((a, b) => SCENARIOS.indexOf(a) - SCENARIOS.indexOf(b));
  return args;
}

/** Sizes of every scenario; `--quick` shrinks them so the whole run fits in about a minute. */
export interface Sizes {
  /** Steps (and graphile-worker jobs) drained by the throughput and replicas scenarios. */
  throughputSteps: number;
  /**
   * Steps (and jobs) drained untimed before each drain is measured, on the same server (and
   * worker): its code compiled, its connections open and its statements prepared, as on a live system.
   */
  warmupSteps: number;
  stepsPerRun: number;
  runners: number;
  /** Offers a simulated runner asks for per acquire (and its registered max_load). */
  runnerSlots: number;
  /** The wide fleet: few runners, many offers each. */
  wideRunners: number;
  wideSlots: number;
  /** Runs submitted by the bulk-submit scenario, and runs per call. */
  bulkRuns: number;
  bulkBatch: number;
  /** Concurrent connections of the SQL floor's claim-and-delete loop, and jobs per claim. */
  floorWorkers: number;
  floorClaim: number;
  latencyRuns: number;
  latencySpacingMs: number;
  latencyRunners: number;
  /** Entries no runner can take, queued before the latency scenario's second sequence. */
  latencyBlocked: number;
  depths: number[];
  /** Steps drained (and timed) at each depth. */
  depthDrain: number;
  replicas: number;
  memoryEntries: number;
  memoryRunners: number;
  /** How long the memory scenario samples RSS once every runner is parked. */
  memorySampleMs: number;
  /** The idle estate: runners long-polling with nothing queued, each poll this long, sampled this long. */
  idleRunners: number;
  idleWaitMs: number;
  idleSampleMs: number;
  /** The fleet scenario: its large fleet, the ready entries under it, the runners parked over an unplaceable backlog and that backlog. */
  fleetRunners: number;
  fleetReady: number;
  fleetBacklogRunners: number;
  fleetBacklog: number;
  /** Registrations in flight at once, as a fleet booting together sends them. */
  fleetRegisterConcurrency: number;
  /** wait_ms of every fleet acquire (the runner agent's default is the server's poll window, 50 s). */
  fleetWaitMs: number;
  /** How long the idle and backlog costs are sampled: one whole poll window, so every runner re-polls once. */
  fleetSampleMs: number;
  /** Single-step runs timed submit → offer, with each fleet parked. */
  fleetLatencyRuns: number;
  /** Ready depths at which the console scenario times one admin queue refresh. */
  consoleDepths: number[];
  /** Interleaved pairs of untraced and traced throughput drains whose median on ÷ off is the traces' cost. */
  tracePairs: number;
  /** graphile-worker settings of the baseline. */
  baselineConcurrency: number;
  baselineLocalQueue: number;
  baselineCompleteBatchDelayMs: number;
}

export function sizesFor(quick: boolean): Sizes {
  const common = { stepsPerRun: 10, wideRunners: 8, wideSlots: 32, bulkBatch: 100, floorWorkers: 8, floorClaim: 64, latencySpacingMs: 20, baselineConcurrency: 24, baselineLocalQueue: 500, baselineCompleteBatchDelayMs: 0, replicas: 3 };
  return quick
    ? { ...common, tracePairs: 3, bulkRuns: 200, throughputSteps: 1_000, warmupSteps: 100, runners: 64, runnerSlots: 4, latencyRuns: 40, latencyRunners: 8, latencyBlocked: 1_000, depths: [1_000, 5_000], depthDrain: 300, memoryEntries: 10_000, memoryRunners: 100, memorySampleMs: 1_000, idleRunners: 50, idleWaitMs: 1_000, idleSampleMs: 1_000, consoleDepths: [1_000, 10_000], fleetRunners: 500, fleetReady: 10_000, fleetBacklogRunners: 100, fleetBacklog: 1_000, fleetRegisterConcurrency: 64, fleetWaitMs: 5_000, fleetSampleMs: 5_000, fleetLatencyRuns: 20 }
    : { ...common, tracePairs: 3, bulkRuns: 2_000, throughputSteps: 20_000, warmupSteps: 10_000, runners: 64, runnerSlots: 4, latencyRuns: 200, latencyRunners: 16, latencyBlocked: 10_500, depths: [10_000, 100_000, 1_000_000], depthDrain: 5_000, memoryEntries: 1_000_000, memoryRunners: 1_000, memorySampleMs: 5_000, idleRunners: 500, idleWaitMs: 1_000, idleSampleMs: 5_000, consoleDepths: [100_000, 1_000_000], fleetRunners: 10_000, fleetReady: 1_000_000, fleetBacklogRunners: 1_000, fleetBacklog: 10_000, fleetRegisterConcurrency: 256, fleetWaitMs: 50_000, fleetSampleMs: 50_000, fleetLatencyRuns: 100 };
}
