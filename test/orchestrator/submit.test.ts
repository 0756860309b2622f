import { describe, expect, it } from 'vitest';
import { shardOf } from '../../src/core/fnv.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit, runSubmitMany } from '../../src/orchestrator/submit.js';
import { poolObserve } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';
import { queued, runStep, runState, stepStates } from '../support/lifecycle.js';

const CHAIN = (name: string) => `
name: ${name}
project: alpha
steps:
  a: { run: echo a }
  b: { run: echo b, needs: [a] }
  c: { run: echo c, needs: [b] }
`;
const WIDE = (name: string) => `
name: ${name}
project: beta
priority: 5
steps:
  x: { run: echo x }
  y: { run: echo y, pools: [db] }
`;

describe('submit in one statement, one run or many', () => {
  const db = useTestDatabase();

  it('writes runs, steps, root queue rows on the run\'s shard and audit rows together; the counters drive the run to its end', async () => {
    const pool = db.current.pool;
    await pool.query(`INSERT INTO projects (name, weight) VALUES ('beta', 3)`);
    const [chain, wide] = await runSubmitMany(pool, [runFileLoad(CHAIN('c1')), runFileLoad(WIDE('w1'))], { actor: 'tester', source: 'cli' });
    expect(chain.ready).toEqual(['a']);
    expect(wide.ready).toEqual(['x', 'y']);
    expect(await stepStates(pool, chain.runId)).toEqual({ a: 'ready/1', b: 'pending/0', c: 'pending/0' });
    const { rows: q } = await pool.query(`SELECT run_id::int AS run_id, shard, attempt, priority, fair_key, weight, pools FROM queue_ready ORDER BY step_id`);
    expect(q).toEqual([
      { run_id: chain.runId, shard: shardOf(chain.runId), attempt: 1, priority: 0, fair_key: 'alpha', weight: 1, pools: null },
      { run_id: wide.runId, shard: shardOf(wide.runId), attempt: 1, priority: 5, fair_key: 'beta', weight: 3, pools: null },
      { run_id: wide.runId, shard: shardOf(wide.runId), attempt: 1, priority: 5, fair_key: 'beta', weight: 3, pools: ['db'] },
    ]);
    const { rows: counters } = await pool.query(`SELECT id, open_steps FROM runs ORDER BY id`);
    expect(counters.map((r) => r.open_steps)).toEqual([3, 2]);
    const { rows: needs } = await pool.query(`SELECT name, unmet_needs, dependents FROM steps WHERE run_id = $1 ORDER BY id`, [chain.runId]);
    expect(needs).toEqual([
      { name: 'a', unmet_needs: 0, dependents: 1 },
      { name: 'b', unmet_needs: 1, dependents: 1 },
      { name: 'c', unmet_needs: 1, dependents: 0 },
    ]);
    const { rows: audit } = await pool.query(`SELECT actor, action, target, source, detail FROM audit_log WHERE action = 'runs.submit' ORDER BY id`);
    expect(audit).toEqual([
      { actor: 'tester', action: 'runs.submit', target: `run:${chain.runId}`, source: 'cli', detail: { name: 'c1', project: 'alpha', steps: 3 } },
      { actor: 'tester', action: 'runs.submit', target: `run:${wide.runId}`, source: 'cli', detail: { name: 'w1', project: 'beta', steps: 2 } },
    ]);

    await runStep(pool, chain.runId, 'a');
    expect(await queued(pool, chain.runId)).toEqual([['b', 1]]);
    await runStep(pool, chain.runId, 'b');
    await runStep(pool, chain.runId, 'c');
    expect(await runState(pool, chain.runId)).toMatchObject({ status: 'succeeded', finished: true });
    const { rows: after } = await pool.query(`SELECT open_steps FROM runs WHERE id = $1`, [chain.runId]);
    expect(after[0].open_steps).toBe(0);
  });

  it('is all or none: a batch that fails writes nothing', async () => {
    const pool = db.current.pool;
    const before = await pool.query(`SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM queue_ready)::int AS q`);
    const good = runFileLoad(CHAIN('ok'));
    const bad = runFileLoad(CHAIN('bad'));
    // A NUL in a command is refused by PostgreSQL inside the one statement.
    (bad.definition.steps[0] as { run: string }).run = '\u0000';
    await expect(runSubmitMany(pool, [good, bad], { actor: 'tester' })).rejects.toThrow();
    const after = await pool.query(`SELECT (SELECT count(*) FROM runs)::int AS runs, (SELECT count(*) FROM queue_ready)::int AS q`);
    expect(after.rows[0]).toEqual(before.rows[0]);
    // One run alone is the same path.
    const one = await runSubmit(pool, good, { actor: 'tester' });
    expect(one.ready).toEqual(['a']);
  });

  it('writes submits that arrive together as one group, each with its own actor; a run the store refuses fails alone', async () => {
    const pool = db.current.pool;
    await pool.query(`INSERT INTO projects (name, weight) VALUES ('beta', 2) ON CONFLICT (name) DO UPDATE SET weight = 2`);
    let statements = 0;
    poolObserve(pool, (seconds) => {
      if (seconds !== null) statements++;
    });
    const bad = runFileLoad(CHAIN('bad'));
    // A NUL in a command is refused by PostgreSQL inside the group's statement.
    (bad.definition.steps[0] as { run: string }).run = '\u0000';
    const files = Array.from({ length: 12 }, (_, i) => runFileLoad(i % 2 ? CHAIN(`c${i}`) : WIDE(`w${i}`)));
    const results = await Promise.allSettled([
      ...files.slice(0, 6).map((f, i) => runSubmit(pool, f, { actor: `actor-${i}`, source: 'api' })),
      runSubmit(pool, bad, { actor: 'actor-bad' }),
      ...files.slice(6).map((f, i) => runSubmit(pool, f, { actor: `actor-${i + 6}` })),
    ]);
    const failed = results.filter((r) => r.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect(results[6].status).toBe('rejected');
    const ok = results.filter((r): r is PromiseFulfilledResult<Awaited<ReturnType<typeof runSubmit>>> => r.status === 'fulfilled').map((r) => r.value);
    expect(ok).toHaveLength(12);
    expect(new Set(ok.map((r) => r.runId)).size).toBe(12);
    // One group of thirteen, refused; then each alone: one statement per write.
    expect(statements).toBe(1 + 13);
    const { rows: audit } = await pool.query(`SELECT actor, source, target FROM audit_log WHERE action = 'runs.submit' AND actor LIKE 'actor-%' ORDER BY id`);
    expect(audit).toHaveLength(12);
    expect(new Set(audit.map((a) => a.actor))).toEqual(new Set(Array.from({ length: 12 }, (_, i) => `actor-${i}`)));
    expect(audit.filter((a) => a.source === 'api')).toHaveLength(6);
    for (const [i, r] of ok.entries()) {
      expect(r.ready).toEqual(i % 2 ? ['a'] : ['x', 'y']);
      expect(audit).toContainEqual(expect.objectContaining({ target: `run:${r.runId}` }));
    }
    const { rows: weights } = await pool.query(`SELECT DISTINCT fair_key, weight FROM queue_ready WHERE run_id = ANY($1::bigint[]) ORDER BY fair_key`, [ok.map((r) => r.runId)]);
    expect(weights).toEqual([{ fair_key: 'alpha', weight: 1 }, { fair_key: 'beta', weight: 2 }]);

    // Submits that arrive together and all succeed: one statement for all of them.
    statements = 0;
    const more = await Promise.all(Array.from({ length: 8 }, (_, i) => runSubmit(pool, runFileLoad(CHAIN(`m${i}`)), { actor: 'tester' })));
    expect(more.map((r) => r.ready)).toEqual(Array.from({ length: 8 }, () => ['a']));
    expect(statements).toBe(1);
  });

  it('reads the path bindings first only for runs a binding may place, and applies the longest', async () => {
    const pool = db.current.pool;
    await pool.query(`INSERT INTO placement_bindings (path, requirement) VALUES ('acme/', '{"group": "acme"}'), ('acme/prod', '{"group": "prod"}')`);
    let statements = 0;
    poolObserve(pool, (seconds) => {
      if (seconds !== null) statements++;
    });
    const targeted = (name: string, target: string, extra = '') => `name: ${name}\nproject: alpha\ntarget: ${target}\n${extra}steps:\n  a: { run: echo a }\n  b: { run: echo b, placement: { group: own } }\n`;
    const [prod, other, placed] = await Promise.all([
      runSubmit(pool, runFileLoad(targeted('t1', 'acme/prod/web')), { actor: 'tester' }),
      runSubmit(pool, runFileLoad(targeted('t2', 'acme/dev')), { actor: 'tester' }),
      // The run's own placement wins over any binding: this run alone would need no read.
      runSubmit(pool, runFileLoad(targeted('t3', 'acme/prod/web', 'placement: { group: runs-own }\n')), { actor: 'tester' }),
    ]);
    // One read of the bindings over both targets, one write.
    expect(statements).toBe(2);
    const { rows } = await pool.query(
      `SELECT s.run_id::int AS run, s.name, q.requirement FROM queue_ready q JOIN steps s ON s.id = q.step_id WHERE s.run_id = ANY($1::bigint[]) ORDER BY s.id`,
      [[prod.runId, other.runId, placed.runId]],
    );
    expect(rows).toEqual([
      { run: prod.runId, name: 'a', requirement: { group: 'prod' } },
      { run: prod.runId, name: 'b', requirement: { group: 'own' } },
      { run: other.runId, name: 'a', requirement: { group: 'acme' } },
      { run: other.runId, name: 'b', requirement: { group: 'own' } },
      { run: placed.runId, name: 'a', requirement: { group: 'runs-own' } },
      { run: placed.runId, name: 'b', requirement: { group: 'own' } },
    ]);
    // Without a binding to consult, a submit is its one statement.
    statements = 0;
    await runSubmit(pool, runFileLoad(targeted('t4', 'acme/prod/web', 'placement: { group: runs-own }\n')), { actor: 'tester' });
    expect(statements).toBe(1);
  });
});

