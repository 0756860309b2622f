import { execFile } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { tokenCreate } from '../src/store/tokens.js';
import type { BenchEnv, Deployment } from './opschain.js';
import { BIN } from './procs.js';
import { figure, percentile, round, type Figure } from './stats.js';

const run = promisify(execFile);

async function timed(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  await run(process.execPath, argv, { env: { ...process.env, NO_COLOR: '1', OCLIF_SKIP_UPDATE_CHECK: '1', ...env }, timeout: 60_000 });
  return performance.now() - t0;
}

interface Verb {
  name: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  /** The most this verb may cost in bare node starts (the target), if it has one. */
  maxTimesNode?: number;
}

/**
 * How long a verb takes from `exec` to exit, as a script calling `opschain` on the PATH pays it
 * (`npm link`; `npx` adds its own seconds on top), against a bare `node -e 0` measured in the same
 * loop: each round runs the bare start and then every verb, so a noisy neighbour weighs on both
 * sides alike. Verbs: `--version` (oclif and the manifest alone), `fleet runners --json` through a
 * server's HTTP API (a read verb that should load no store, no server, no dashboard), and
 * `pools list --json` straight from the store (connect, one query, render). Median of N after a warm-up.
 */
export async function startupFigures(env: BenchEnv, deploy: (label: string, replicas: number) => Promise<Deployment>): Promise<Figure[]> {
  const n = env.args.quick ? 7 : 21;
  const d = await deploy('startup', 1);
  try {
    const { secret } = await tokenCreate(d.pool, { kind: 'admin', name: 'bench-startup', scope: 'read' });
    const verbs: Verb[] = [
      { name: 'opschain --version', args: [BIN, '--version'], maxTimesNode: 4 },
      { name: 'fleet runners --json over HTTP', args: [BIN, 'fleet', 'runners', '--json', '--server', d.urls[0]], env: { OPSCHAIN_TOKEN: secret }, maxTimesNode: 6 },
      { name: 'opschain pools list --json (store)', args: [BIN, 'pools', 'list', '--json', '--database-url', d.db.url] },
    ];
    const bare = ['-e', '0'];
    env.progress(`startup: node -e 0 and ${verbs.length} verbs, ${n} rounds`);
    await timed(bare, {});
    for (const v of verbs) await timed(v.args, v.env ?? {});
    const nodeMs: number[] = [];
    const samples = verbs.map(() => [] as number[]);
    for (let i = 0; i < n; i++) {
      nodeMs.push(await timed(bare, {}));
      for (const [k, v] of verbs.entries()) samples[k].push(await timed(v.args, v.env ?? {}));
    }
    const nodeP50 = percentile(nodeMs, 50);
    const figures: Figure[] = [figure({ scenario: 'startup', metric: `node -e 0 p50 (${n} runs)`, value: nodeP50, unit: 'ms', better: 'lower' })];
    for (const [k, v] of verbs.entries()) {
      const p50 = percentile(samples[k], 50);
      if (v.maxTimesNode !== undefined) {
        const f = figure({ scenario: 'startup', metric: `${v.name} p50 ×node`, value: p50 / nodeP50, unit: '×', better: 'lower', target: `≤ ${v.maxTimesNode}` });
        f.met = f.value <= v.maxTimesNode;
        f.note = `${round(p50)} ms against node -e 0 ${round(nodeP50)} ms`;
        figures.push(f);
      }
      figures.push(figure({ scenario: 'startup', metric: `${v.name} p50 (${n} runs)`, value: p50, unit: 'ms', better: 'lower' }));
      figures.push(figure({ scenario: 'startup', metric: `${v.name} max`, value: Math.max(...samples[k]), unit: 'ms', better: 'lower' }));
    }
    return figures;
  } finally {
    await d.stop();
  }
}
