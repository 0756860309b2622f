import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { migrate } from '../src/store/migrate.js';
import { createPool } from '../src/store/pool.js';
import type { BenchEnv } from './opschain.js';
import { figure, percentile, type Figure } from './stats.js';

const run = promisify(execFile);
// dist/bench/startup.js → the package root, where bin/run.js lives.
const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'run.js');

async function timed(args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  await run(process.execPath, [BIN, ...args], { env: { ...process.env, NO_COLOR: '1', ...env }, timeout: 60_000 });
  return performance.now() - t0;
}

/**
 * How long a verb takes from `exec` to exit, as a script calling `opschain` on the PATH pays it
 * (`npm link`; `npx` adds its own seconds on top): `opschain --version`, and one read verb
 * against the store (`pools list --json`: connect, one query, render). Median of N after a warm-up.
 */
export async function startupFigures(env: BenchEnv): Promise<Figure[]> {
  const n = env.args.quick ? 5 : 15;
  const db = await env.dbs.create('startup');
  const pool = createPool(db.url, { max: 1, applicationName: 'opschain-bench' });
  try {
    await migrate(pool);
  } finally {
    await pool.end();
  }
  const verbs: Array<{ name: string; args: string[] }> = [
    { name: 'opschain --version', args: ['--version'] },
    { name: 'opschain pools list --json (store)', args: ['pools', 'list', '--json', '--database-url', db.url] },
  ];
  const figures: Figure[] = [];
  for (const v of verbs) {
    env.progress(`startup: ${v.name} × ${n}`);
    await timed(v.args, {});
    const samples: number[] = [];
    for (let i = 0; i < n; i++) samples.push(await timed(v.args, {}));
    figures.push(figure({ scenario: 'startup', metric: `${v.name} p50 (${n} runs)`, value: percentile(samples, 50), unit: 'ms', better: 'lower' }));
    figures.push(figure({ scenario: 'startup', metric: `${v.name} max`, value: Math.max(...samples), unit: 'ms', better: 'lower' }));
  }
  return figures;
}
