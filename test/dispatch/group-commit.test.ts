import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { DispatchDeps } from '../../src/dispatch/deps.js';
import { ackLeases, completeLeases, releaseLeases, renewLeases, type ItemResult } from '../../src/dispatch/lifecycle.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { Pool } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';
import { deliver, leaseToken, registerRunner, testDispatchDeps } from '../support/lifecycle.js';

const RUNNERS = ['rnr_a', 'rnr_b', 'rnr_c'];
const LEASES = 4;

type TokenKind = 'current' | 'stale' | 'bogus';
interface CallSpec { kind: 'ack' | 'renew' | 'complete'; runner: number; items: Array<{ lease: number; token: TokenKind; exit: number }> }
interface Scenario { holders: number[]; preCompleted: boolean[]; calls: CallSpec[] }

const scenario: fc.Arbitrary<Scenario> = fc.record({
  holders: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: LEASES, maxLength: LEASES }),
  preCompleted: fc.array(fc.boolean(), { minLength: LEASES, maxLength: LEASES }),
  calls: fc.array(
    fc.record({
      kind: fc.constantFrom('ack' as const, 'renew' as const, 'complete' as const),
      runner: fc.integer({ min: 0, max: 2 }),
      items: fc.array(fc.record({ lease: fc.integer({ min: 0, max: LEASES - 1 }), token: fc.constantFrom('current' as const, 'stale' as const, 'bogus' as const), exit: fc.constantFrom(0, 1) }), { minLength: 1, maxLength: 4 }),
    }),
    { minLength: 1, maxLength: 8 },
  ),
});

const DIAMOND = `
name: property
steps:
  a: { run: 'true' }
  b: { run: 'true' }
  c: { run: 'true', needs: [a] }
  d: { run: 'true', needs: [a, b] }
`;

/**
 * One copy of the scenario's starting state: a run whose four leases each went out once, came
 * back (so each step has a stale token), went out again to its holder, and some were completed.
 */
async function setUp(pool: Pool, deps: DispatchDeps, s: Scenario): Promise<{ runId: number; leases: Array<{ stepId: number; current: string; stale: string }> }> {
  // Two roots and two dependents: only the roots can be leased at first, so lease the roots of two runs.
  const runs = [(await runSubmit(pool, runFileLoad(DIAMOND), { actor: 'test' })).runId, (await runSubmit(pool, runFileLoad(DIAMOND), { actor: 'test' })).runId];
  const leases: Array<{ stepId: number; current: string; stale: string }> = [];
  for (let i = 0; i < LEASES; i++) {
    const run = runs[i >> 1];
    const step = i % 2 === 0 ? 'a' : 'b';
    const holder = RUNNERS[s.holders[i]];
    const first = await deliver(pool, { run, step, runnerId: holder });
    const stale = await leaseToken(pool, first.stepId);
    await releaseLeases(deps, holder, [{ stepId: first.stepId, token: stale }]);
    const again = await deliver(pool, { run, step, runnerId: holder });
    leases.push({ stepId: again.stepId, current: await leaseToken(pool, again.stepId), stale });
  }
  for (let i = 0; i < LEASES; i++) {
    if (s.preCompleted[i]) await completeLeases(deps, RUNNERS[s.holders[i]], [{ stepId: leases[i].stepId, token: leases[i].current, exitCode: 0, cause: null }]);
  }
  return { runId: runs[0], leases };
}

function call(deps: DispatchDeps, c: CallSpec, leases: Array<{ stepId: number; current: string; stale: string }>): Promise<ItemResult[]> {
  const items = c.items.map((i) => {
    const l = leases[i.lease];
    const token = i.token === 'current' ? l.current : i.token === 'stale' ? l.stale : String(BigInt(l.current) + 1_000_000n);
    return { stepId: l.stepId, token, exitCode: i.exit, cause: null };
  });
  const runner = RUNNERS[c.runner];
  if (c.kind === 'ack') return ackLeases(deps, runner, items);
  if (c.kind === 'renew') return renewLeases(deps, runner, items);
  return completeLeases(deps, runner, items);
}

/** What the store holds afterwards, by lease index: step status and exit code, lease held, done records. */
async function outcome(pool: Pool, leases: Array<{ stepId: number }>) {
  const ids = leases.map((l) => l.stepId);
  const { rows } = await pool.query(
    `SELECT s.id, s.status, s.exit_code, (SELECT count(*)::int FROM step_leases l WHERE l.step_id = s.id) AS leased,
            (SELECT count(*)::int FROM completed_attempts d WHERE d.step_id = s.id) AS done
       FROM steps s WHERE s.id = ANY($1::bigint[])`,
    [ids],
  );
  const byId = new Map(rows.map((r) => [Number(r.id), { status: r.status, exit: r.exit_code, leased: r.leased, done: r.done }]));
  const { rows: runs } = await pool.query(
    `SELECT r.status, r.open_steps, (SELECT count(*)::int FROM steps s WHERE s.run_id = r.id AND s.status IN ('pending', 'ready', 'running')) AS open
       FROM runs r WHERE r.id IN (SELECT run_id FROM steps WHERE id = ANY($1::bigint[])) ORDER BY r.id`,
    [ids],
  );
  return { steps: ids.map((id) => byId.get(id)), runs: runs.map((r) => ({ status: r.status, counted: r.open_steps, open: r.open })) };
}

describe('group commit', () => {
  const db = useTestDatabase();

  it('gives every item of a group the verdict it gets alone: stale and bogus tokens fenced, repeats idempotent, other runners refused', async () => {
    const pool = db.current.pool;
    for (const r of RUNNERS) await registerRunner(pool, r, r);
    const deps = testDispatchDeps(pool);
    await fc.assert(
      fc.asyncProperty(scenario, async (s) => {
        // Alone: each call awaited before the next, acks first, then renewals, then completions
        // (the order a group applies them in).
        const alone = await setUp(pool, deps, s);
        const order = [...s.calls.filter((c) => c.kind === 'ack'), ...s.calls.filter((c) => c.kind === 'renew'), ...s.calls.filter((c) => c.kind === 'complete')];
        const aloneResults = new Map<CallSpec, ItemResult[]>();
        for (const c of order) aloneResults.set(c, await call(deps, c, alone.leases));
        const aloneState = await outcome(pool, alone.leases);

        // Together: every call issued in the same turn, so they share one group and one commit.
        const together = await setUp(pool, deps, s);
        const before = { ...deps.groupCommit.stats };
        const results = await Promise.all(s.calls.map((c) => call(deps, c, together.leases)));
        const after = deps.groupCommit.stats;
        expect({ groups: after.groups - before.groups, calls: after.calls - before.calls }).toEqual({ groups: 1, calls: s.calls.length });
        const togetherState = await outcome(pool, together.leases);

        // What alone means: a stale or unknown token is fenced, and so is any runner but the holder;
        // the holder's current token is acked or renewed while the lease is live, and its
        // completion is ok whether it ends the lease or repeats the one recorded.
        for (const c of order) {
          aloneResults.get(c)!.forEach((r, k) => {
            const item = c.items[k];
            const own = c.runner === s.holders[item.lease] && item.token === 'current';
            const expected = own && (c.kind === 'complete' || !s.preCompleted[item.lease]);
            expect(r.ok).toBe(expected);
            if (!expected) expect(r).toMatchObject({ status: 409, error: 'lease expired or revoked' });
          });
        }

        const strip = (r: ItemResult[]) => r.map(({ ok, status, error }) => ({ ok, status, error }));
        s.calls.forEach((c, i) => expect(strip(results[i])).toEqual(strip(aloneResults.get(c)!)));
        expect(togetherState).toEqual(aloneState);
        // The counters agree with the steps.
        for (const r of togetherState.runs) if (r.status === 'running') expect(r.counted).toBe(r.open);
      }),
      { numRuns: 20 },
    );
    // Each case builds its state twice against the real store: give a loaded machine room.
  }, 240_000);
});
