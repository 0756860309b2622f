import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { RunFileInvalid, runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import { PgLogWatch } from '../support/pg-log.js';
import { useTestDatabase } from '../support/db.js';
import { hostileNumber, hostileString, hostileValue } from './hostile.js';

/**
 * The fuzz tier of the run-file front end: every text either is refused whole (RunFileInvalid,
 * naming its problems) or yields a definition the store takes as it is. Nothing else: no
 * TypeError, no stack overflow, no store error of class 22 or 42 on submit.
 */
const SEED = 20_261_202;
const CASES = Number(process.env.OPSCHAIN_FUZZ_CASES ?? 40) * 8;

const stepName = fc.constantFrom('build', 'test', 'deploy', 'a', 'b_2');
const step = fc.record(
  {
    run: fc.constantFrom('true', 'echo hi', 'exit 0'),
    needs: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(stepName, { maxLength: 2 }) }),
    env: fc.dictionary(fc.constantFrom('A', 'REGION', 'B_1'), fc.string({ maxLength: 10 }), { maxKeys: 2 }),
    timeout: fc.constantFrom('10m', '1s', '24h'),
    pools: fc.array(fc.constantFrom('db', 'net'), { maxLength: 2 }),
    load: fc.constantFrom(1, 2, 0.5, 0.001, 100000),
    priority: fc.integer({ min: 0, max: 199 }),
    placement: fc.record({ labels: fc.array(fc.constantFrom('linux', 'x86'), { maxLength: 2 }), selectors: fc.dictionary(fc.constantFrom('location', 'tier'), fc.array(fc.constantFrom('dc1', 'dc2'), { minLength: 1, maxLength: 2 }), { maxKeys: 1 }) }, { requiredKeys: [] }),
  },
  { requiredKeys: ['run'] },
);
const runFile = fc.record(
  {
    name: fc.constantFrom('deploy-web', 'nightly'),
    project: fc.constantFrom('acme', 'default'),
    target: fc.constantFrom('acme/prod/web', 'x'),
    scope: fc.constantFrom('step', 'run'),
    max_parallel_steps: fc.integer({ min: 1, max: 1000 }),
    priority: fc.integer({ min: 0, max: 199 }),
    env: fc.dictionary(fc.constantFrom('REGION', 'X'), fc.string({ maxLength: 10 }), { maxKeys: 2 }),
    steps: fc.dictionary(stepName, step, { minKeys: 1, maxKeys: 4 }),
  },
  { requiredKeys: ['name', 'steps'] },
);

/** Replace the value at one path (chosen by index among all paths) with a hostile one. */
function plant(value: unknown, pick: number, hostile: unknown, key?: string): unknown {
  const paths: Array<Array<string | number>> = [];
  const walk = (v: unknown, at: Array<string | number>) => {
    paths.push(at);
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, [...at, i]));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) walk(x, [...at, k]);
  };
  walk(value, []);
  const path = paths[pick % paths.length];
  if (path.length === 0) return hostile;
  const root = structuredClone(value) as Record<string | number, unknown>;
  let node = root;
  for (const seg of path.slice(0, -1)) node = node[seg] as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (key !== undefined && node && typeof node === 'object' && !Array.isArray(node)) {
    // A hostile key instead of a hostile value.
    Object.defineProperty(node, key, { value: hostile, enumerable: true, configurable: true, writable: true });
  } else node[last] = hostile;
  return root;
}

const setArg = fc.oneof(
  fc.tuple(fc.constantFrom('priority', 'steps.build.load', 'env.X', 'steps.a.needs', 'placement.labels', '__proto__.polluted', 'steps.constructor.prototype.x', 'a..b', '=x', 'steps.build.run'), fc.oneof(hostileString, hostileNumber.map(String))).map(([k, v]) => `${k}=${v}`),
  hostileString,
);

describe('fuzz: the run-file front end', { timeout: 180_000 }, () => {
  const db = useTestDatabase();
  const pgLog = new PgLogWatch();
  beforeAll(() => {
    pgLog.mark();
  });

  it('refuses a hostile run file whole, or stores what it accepted', async () => {
    let accepted = 0;
    let refused = 0;
    const input = fc.record({
      file: runFile,
      pick: fc.nat(),
      hostile: hostileValue,
      key: fc.option(fc.constantFrom('__proto__', 'constructor', 'prototype', '\u0000', '\ud800', 'x'.repeat(300)), { freq: 4 }),
      plant: fc.oneof(fc.constant(true), fc.constant(false), fc.constant(false)),
      yaml: fc.boolean(),
      sets: fc.oneof({ weight: 3, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: fc.array(setArg, { maxLength: 2 }) }),
    });
    await fc.assert(
      fc.asyncProperty(input, async (c) => {
        const value = c.plant ? plant(c.file, c.pick, c.hostile, c.key ?? undefined) : c.file;
        let text: string;
        try {
          text = c.yaml ? stringify(value) : JSON.stringify(value);
        } catch {
          text = JSON.stringify(value);
        }
        let loaded: ReturnType<typeof runFileLoad>;
        try {
          loaded = runFileLoad(text, [...c.sets]);
        } catch (err) {
          if (!(err instanceof RunFileInvalid)) throw new Error(`not a RunFileInvalid: ${(err as Error).stack}\n${text.slice(0, 300)}`);
          expect(err.problems.length).toBeGreaterThan(0);
          refused++;
          return;
        }
        accepted++;
        await runSubmit(db.current.pool, loaded, { actor: 'fuzz' });
      }),
      { seed: SEED, numRuns: CASES },
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    console.log(`fuzz: ${CASES} run files (seed ${SEED}): ${accepted} accepted and stored, ${refused} refused`);
    expect(accepted).toBeGreaterThan(0);
    expect(refused).toBeGreaterThan(0);
  });

  it('left no error of class 22 or 42 in the PostgreSQL log for this database', (t) => pgLog.expectClean(db.current.name, t));
});
