import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverPlan } from '../../src/features.js';
import type { ServerHandle } from '../../src/server.js';
import { tokenCreate } from '../../src/store/tokens.js';
import { runCli, type CliResult } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { TestRunner } from '../support/runner-client.js';
import { startTestServer } from '../support/server.js';

/**
 * The fuzz tier of the terminal: every stored string a human output shows (run names, targets
 * and labels, a step's failure cause, drain and posture reasons, token, group, pool and project
 * names, group attributes) holds the sequences an attacker would plant: OSC 52 (writes the
 * operator's clipboard), CSI erase-line in its 7-bit and 8-bit (C1) forms, conceal, a carriage
 * return, BEL, DEL, NEL and a bidi override. Each listed verb of the built binary is run through
 * both transports (the store, and a server over HTTP) with NO_COLOR=1, so the CLI emits no
 * escape of its own and any control byte in its output is a leak. `--json` keeps the stored value.
 */
const SEQUENCES = ['\u001b]52;c;b3duZWQ=\u0007', '\u001b[2K', '\u009b2K', '\u001b[8m', '\r', '\u0007', '\u007f', '\u0085', '\u202e', '\u2066'];
const evil = (tag: string) => `${tag}-${SEQUENCES.join('')}-end`;

// Any C0 control but newline, DEL, any C1 control, any bidi override or isolate.
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/u;

function leak(output: string): string | undefined {
  const m = RAW.exec(output);
  if (!m) return undefined;
  return `U+${m[0].charCodeAt(0).toString(16).padStart(4, '0')} at ${m.index}: ${JSON.stringify(output.slice(Math.max(0, m.index - 40), m.index + 40))}`;
}

describe('fuzz: stored text reaches the terminal shown, never obeyed', { timeout: 240_000 }, () => {
  const db = useTestDatabase();
  const dir = mkdtempSync(join(tmpdir(), 'opschain-fuzz-term-'));
  let server: ServerHandle;
  let admin: string;
  let readEvil: string;
  const runs: Record<string, number> = {};

  const viaStore = (...args: string[]) => runCli([...args, '--database-url', db.current.url, '--home', dir], { OPSCHAIN_SERVER: '', OPSCHAIN_TOKEN: '' });
  const viaHttp = (...args: string[]) => runCli([...args, '--server', server.url, '--token', admin, '--home', dir], { DATABASE_URL: '' });
  const ok = (r: CliResult, what: string): CliResult => {
    expect(r.code, `${what}: ${r.stderr}${r.stdout}`).toBe(0);
    return r;
  };
  const submit = async (via: typeof viaStore, file: string, body: unknown): Promise<number> => {
    writeFileSync(join(dir, file), JSON.stringify(body));
    const r = ok(await via('runs', 'submit', join(dir, file)), `runs submit ${file}`);
    return Number(r.stdout.trim());
  };

  beforeAll(async () => {
    server = await startTestServer(db.current.url, { plan: serverPlan(), config: { pollWindowMs: 2_000 } });
    // Identifiers are refused with controls at input now; rows written before that (or straight
    // into the store) must still print safely, so these go in beneath the verbs.
    admin = (await tokenCreate(db.current.pool, { kind: 'admin', name: evil('token') })).secret;
    readEvil = (await tokenCreate(db.current.pool, { kind: 'admin', name: evil('reader'), scope: 'read' })).secret;
    const reg = (await tokenCreate(db.current.pool, { kind: 'registration', name: evil('registration') })).secret;
    await db.current.pool.query(`INSERT INTO pool_limits (name, max_holders) VALUES ($1, 2)`, [evil('pool')]);
    await db.current.pool.query(`INSERT INTO projects (name, weight) VALUES ($1, 3)`, [evil('project')]);
    await db.current.pool.query(`INSERT INTO runner_groups (name, attributes) VALUES ($1, $2)`, [evil('group'), { [evil('key')]: evil('value') }]);

    const runner = await new TestRunner(server.url).register(reg, { name: 'term-runner', max_parallel_steps: 4, max_load: 4 });
    // Through each transport: a run whose step fails with a hostile cause, one whose step is held
    // on a live lease, one that waits for a label no runner has.
    runs.failed = await submit(viaStore, 'failed.json', { name: evil('run-store'), target: `acme/${evil('target')}`, steps: { boom: { run: 'false' } } });
    runs.leased = await submit(viaHttp, 'leased.json', { name: evil('run-http'), target: `zeta/${evil('target')}`, steps: { hold: { run: 'sleep 1' } } });
    runs.waiting = await submit(viaHttp, 'waiting.json', { name: evil('run-waits'), placement: { labels: [evil('label')] }, steps: { wait: { run: 'true' } } });
    const acquire = async (run: number) => {
      const got = await waitFor(async () => {
        const r = await runner.acquire({ only_run_id: run, wait_ms: 1_000 });
        return r.status === 200 ? r.body.offers[0] : undefined;
      }, { what: `an offer of run ${run}` });
      expect((await runner.call('ack', { leases: [{ step_id: got.step_id, token: got.token }] })).status).toBe(200);
      return got;
    };
    const boom = await acquire(runs.failed);
    await acquire(runs.leased);
    const done = await runner.call('complete', { completions: [{ step_id: boom.step_id, token: boom.token, exit_code: 1, cause: evil('cause') }] });
    expect(done.body.results[0].ok).toBe(true);
    // The runner in the hostile group (a group name is refused at registration now; an older row can hold one).
    await db.current.pool.query(`UPDATE runners SET group_name = $1 WHERE id = $2`, [evil('group'), runner.runnerId]);

    ok(await viaStore('groups', 'set', 'plain-group', '--attr', `zone=${evil('attribute')}`), 'groups set');
    ok(await viaStore('fleet', 'drain', '--group', 'plain-group', '--reason', evil('group-drain')), 'fleet drain --group');
    ok(await viaHttp('fleet', 'drain', 'term-runner', '--reason', evil('runner-drain')), 'fleet drain runner');
    ok(await viaHttp('fleet', 'quiesce', '--reason', evil('quiesce')), 'fleet quiesce');
    ok(await viaStore('admin', 'platform', 'halt', '--reason', evil('halt')), 'admin platform halt');
  });
  afterAll(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const verbs = (): string[][] => [
    ['runs', 'list'],
    ['runs', 'show', String(runs.failed)],
    ['runs', 'show', String(runs.leased)],
    ['runs', 'show', String(runs.waiting)],
    ['fleet', 'queue'],
    ['fleet', 'runners'],
    ['admin', 'queue'],
    ['admin', 'audit'],
    ['admin', 'status'],
    ['tokens', 'list'],
    ['groups', 'list'],
    ['pools', 'list'],
    ['projects', 'list'],
  ];

  for (const [transport, pick] of [
    ['the store', () => viaStore],
    ['a server over HTTP', () => viaHttp],
  ] as const) {
    it(`every listed verb's human output through ${transport} holds no raw control byte, and shows the sequences as text`, async () => {
      const via = pick();
      const failures: string[] = [];
      for (const argv of verbs()) {
        const r = await via(...argv);
        const what = `opschain ${argv.join(' ')}`;
        if (r.code !== 0) failures.push(`${what}: exit ${r.code}: ${r.stderr.slice(0, 300)}`);
        for (const [stream, out] of [['stdout', r.stdout], ['stderr', r.stderr]] as const) {
          const found = leak(out);
          if (found) failures.push(`${what} ${stream}: raw ${found}`);
        }
        // The hostile text is there, shown: its escape and its C1 CSI as visible text.
        if (!r.stdout.includes('\\x1b]52;c;b3duZWQ=\\x07') || !r.stdout.includes('\\u009b2K') || !r.stdout.includes('\\u202e')) failures.push(`${what}: the stored sequences are not shown escaped: ${r.stdout.slice(0, 400)}`);
      }
      expect(failures).toEqual([]);
    });
  }

  it('--json keeps the exact stored values', async () => {
    const list = JSON.parse(ok(await viaHttp('runs', 'list', '--json'), 'runs list --json').stdout);
    expect(list.runs.map((r: { name: string }) => r.name)).toEqual(expect.arrayContaining([evil('run-store'), evil('run-http'), evil('run-waits')]));
    const show = JSON.parse(ok(await viaStore('runs', 'show', String(runs.failed), '--json'), 'runs show --json').stdout);
    expect(show.steps[0].cause).toBe(evil('cause'));
    const tokens = JSON.parse(ok(await viaStore('tokens', 'list', '--json'), 'tokens list --json').stdout);
    expect(tokens.tokens.map((t: { name: string }) => t.name)).toContain(evil('token'));
  });

  it('error messages quoting stored or typed text are shown, never obeyed, through both transports', async () => {
    // A token's own name in the scope refusal (exit 7, a refused token), and a refused identifier quoted back.
    const lacking = await runCli(['admin', 'audit', '--server', server.url, '--token', readEvil, '--home', dir], { DATABASE_URL: '' });
    expect(lacking.code).toBe(7);
    expect(lacking.stderr).toMatch(/^Error: token reader-.*\\x1b\]52.* has scope read/);
    expect(leak(lacking.stderr)).toBeUndefined();
    for (const via of [viaStore, viaHttp]) {
      const refused = await via('pools', 'set', evil('new-pool'), '3');
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/^Error: pool name "new-pool-\\x1b\]52;c;b3duZWQ=\\x07.*": contains the control character U\+001B/);
      expect(leak(refused.stderr + refused.stdout)).toBeUndefined();
    }
  });
});
