import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readRunLogs } from '../../src/ops/follow.js';
import { httpOps } from '../../src/ops/transport/http.js';
import type { Ops, OpsOutput } from '../../src/ops/index.js';
import { storeOps } from '../../src/ops/transport/store.js';
import { runRetry } from '../../src/orchestrator/retry.js';
import { runFileLoad } from '../../src/orchestrator/runfile.js';
import { runSubmit } from '../../src/orchestrator/submit.js';
import type { ServerHandle } from '../../src/server.js';
import { stepLogAppend } from '../../src/store/logs.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { useTestDatabase } from '../support/db.js';
import { complete, deliver, giveBack, registerRunner } from '../support/lifecycle.js';
import { startTestServer } from '../support/server.js';

type Line = OpsOutput<'runsLogs'>['lines'][number];

/** A reader of `runs logs` pages from its own cursor, each read going on until a page comes back short. */
function follower(ops: Ops, id: number, limit: number) {
  let after: string | undefined;
  const seen: Line[] = [];
  return {
    seen,
    async read(): Promise<string[]> {
      const got: Line[] = [];
      while (true) {
        const page = await ops.runsLogs({ id, after, limit });
        after = page.cursor;
        got.push(...page.lines);
        if (!page.more) break;
      }
      seen.push(...got);
      return got.map(show);
    },
  };
}

const show = (l: Line) => `${l.step}/${l.attempt} ${l.text.trimEnd()}`;

describe('the started line of every attempt, derived when logs are read', () => {
  const db = useTestDatabase();
  let server: ServerHandle;
  let http: Ops;
  let store: Ops;

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: { ops: true } });
    const { secret } = await tokenCreate(db.current.pool, { kind: 'admin', name: 'reader', scope: 'read' });
    http = httpOps({ server: server.url, token: secret });
    store = storeOps({ pool: db.current.pool, actor: 'test', source: 'test' });
  });
  afterAll(async () => {
    await server?.stop();
  });

  it('appears once per attempt, before its output, across a requeue and a retry, for followers on both transports', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_one', 'build-01');
    await registerRunner(pool, 'rnr_two', 'build-02');
    const run = (await runSubmit(pool, runFileLoad('name: started\nsteps:\n  a: { run: make }\n  b: { run: lint }\n'), { actor: 'test' })).runId;
    const out = (lease: { stepId: number; attempt: number }, text: string) => stepLogAppend(pool, { stepId: lease.stepId, attempt: lease.attempt, chunks: [{ stream: 'stdout', text: `${text}\n` }] });
    const stored = async () => (await pool.query(`SELECT l.id::int, l.chunk FROM step_logs l JOIN steps s ON s.id = l.step_id WHERE s.run_id = $1 ORDER BY l.id`, [run])).rows;

    // Pages of one line and of two (HTTP) cut between a derived line and the stored ones around it.
    const followers = [follower(store, run, 1), follower(http, run, 2), follower(store, run, 1000)];
    const read = async () => {
      const got = await Promise.all(followers.map((f) => f.read()));
      expect(got[0]).toEqual(got[2]);
      expect(got[1]).toEqual(got[2]);
      return got[2];
    };
    expect(await read()).toEqual([]);

    // Delivery writes no log row, through the single hook and the dispatcher's batch hook alike.
    const a1 = await deliver(pool, { run, step: 'a', runnerId: 'rnr_one' });
    expect(await stored()).toEqual([]);
    expect(await read()).toEqual(['a/1 attempt 1 started on runner build-01']);
    await out(a1, 'one');
    const b1 = await deliver(pool, { run, step: 'b', runnerId: 'rnr_two', batch: true });
    expect((await stored()).map((r) => r.chunk)).toEqual(['one\n']);
    expect(await read()).toEqual(['a/1 one', 'b/1 attempt 1 started on runner build-02']);
    await out(b1, 'lint ok');

    // The requeue writes attempt 1's started line under the id it was read under: not shown again.
    await giveBack(pool, a1, { newAttempt: true, reason: 'released by the runner' });
    expect(await read()).toEqual(['b/1 lint ok', 'a/1 attempt 1 back to the queue as attempt 2: released by the runner']);
    const a2 = await deliver(pool, { run, step: 'a', runnerId: 'rnr_two', batch: true });
    expect(await read()).toEqual(['a/2 attempt 2 started on runner build-02']);
    await out(a2, 'two');
    await complete(pool, a2, { status: 'failed', runnerId: 'rnr_two' });
    await complete(pool, b1, { status: 'succeeded', runnerId: 'rnr_two' });
    expect(await read()).toEqual(['a/2 two']);

    await runRetry(pool, run, { actor: 'test' });
    expect(await read()).toEqual(['a/3 retried by test as attempt 3']);
    const a3 = await deliver(pool, { run, step: 'a', runnerId: 'rnr_one' });
    await out(a3, 'three');
    expect(await read()).toEqual(['a/3 attempt 3 started on runner build-01', 'a/3 three']);
    await complete(pool, a3, { status: 'succeeded', runnerId: 'rnr_one' });
    expect(await read()).toEqual([]);

    const whole = [
      'a/1 attempt 1 started on runner build-01',
      'a/1 one',
      'b/1 attempt 1 started on runner build-02',
      'b/1 lint ok',
      'a/1 attempt 1 back to the queue as attempt 2: released by the runner',
      'a/2 attempt 2 started on runner build-02',
      'a/2 two',
      'a/3 retried by test as attempt 3',
      'a/3 attempt 3 started on runner build-01',
      'a/3 three',
    ];
    // Every follower saw exactly what a reader from the start sees now, under the same ids.
    for (const ops of [store, http]) {
      const all = (await ops.runsLogs({ id: run })).lines;
      expect(all.map(show)).toEqual(whole);
      for (const f of followers) expect(f.seen).toEqual(all);
      const ids = all.map((l) => l.id);
      expect(ids).toEqual([...new Set(ids)].sort((x, y) => x - y));
      const followed: Line[] = [];
      expect(await readRunLogs(ops, { id: run, follow: true, onLines: (lines) => followed.push(...lines) })).toBe('succeeded');
      expect(followed).toEqual(all);
      expect((await ops.runsLogs({ id: run, step: 'b' })).lines.map(show)).toEqual(['b/1 attempt 1 started on runner build-02', 'b/1 lint ok']);
    }
    // Ended attempts' started lines are stored (under the ids they were shown with); current ones are not.
    const all = (await store.runsLogs({ id: run })).lines;
    const startedIds = (attempt: number, step: string) => all.filter((l) => l.step === step && l.attempt === attempt && l.text.includes('started on runner')).map((l) => l.id);
    expect((await stored()).filter((r) => r.chunk.includes('started on runner')).map((r) => r.id)).toEqual([...startedIds(1, 'a'), ...startedIds(2, 'a')]);
  });

  it('an attempt handed back unseen and started again shows both starts', async () => {
    const pool = db.current.pool;
    await registerRunner(pool, 'rnr_one', 'build-01');
    const run = (await runSubmit(pool, runFileLoad('name: handback\nsteps:\n  a: { run: make }\n'), { actor: 'test' })).runId;
    const reader = follower(store, run, 1);
    const a = await deliver(pool, { run, step: 'a', runnerId: 'rnr_one' });
    expect(await reader.read()).toEqual(['a/1 attempt 1 started on runner build-01']);
    await giveBack(pool, a, { newAttempt: false, reason: 'the acquire call went away' });
    await deliver(pool, { run, step: 'a', runnerId: 'rnr_gone' });
    expect(await reader.read()).toEqual(['a/1 attempt 1 back to the queue as attempt 1: the acquire call went away', 'a/1 attempt 1 started on runner rnr_gone']);
    expect((await store.runsLogs({ id: run })).lines).toEqual(reader.seen);
  });
});
