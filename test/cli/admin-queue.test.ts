import { describe, expect, it } from 'vitest';
import { tokenCreate } from '../../src/store/tokens.js';
import { startTestServer } from '../support/server.js';
import { CliProcess, runCli } from '../support/cli.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { insertLease, insertRunner } from '../support/fleet.js';
import { seedRun } from '../support/seed.js';

describe('admin queue and fleet runners', () => {
  const db = useTestDatabase();
  const cli = (...args: string[]) => runCli([...args, '--database-url', db.current.url]);

  it('shows lanes, leases, verdicts and runners as tables and as JSON from one view-model', async () => {
    await insertRunner(db.current.pool, { id: 'r-cli', name: 'cli-runner', maxLoad: 2, maxParallelSteps: 1, labels: ['linux'] });
    const { runId } = await seedRun(db.current.pool, { steps: [{ name: 'a' }, { name: 'b' }] });
    await insertLease(db.current.pool, { stepId: 7_000, runId, runnerId: 'r-cli', holder: 'rep-x' });

    const json = await cli('admin', 'queue', '--json');
    expect(json.code).toBe(0);
    const v = JSON.parse(json.stdout);
    expect(v.lanes.find((l: any) => l.lane === 'bulk')).toMatchObject({ ready: 2, leased: 1, readyEstimated: false });
    expect(v.leases.items[0]).toMatchObject({ stepId: 7_000, run: 'seed', runner: 'cli-runner', holder: 'rep-x' });

    const plain = await cli('admin', 'queue');
    expect(plain.code).toBe(0);
    expect(plain.stdout).toMatch(/^bulk\s+2\s+1\s/m);
    expect(plain.stdout).toMatch(/cli-runner/);
    // cli-runner has load to spare (1/2) but runs its one parallel step (1/1): full, not waiting for a tick.
    expect(plain.stdout).toMatch(/all_matches_busy\s+2\b/);
    expect(plain.stdout).not.toMatch(/waiting_for_tick/);
    const queue = await cli('fleet', 'queue');
    expect(queue.stdout).toContain('every matching runner full: cli-runner at its max parallel steps (1/1)');

    const limited = JSON.parse((await cli('admin', 'queue', '--json', '--limit', '1')).stdout);
    expect(limited.leases).toMatchObject({ total: 1, shown: 1 });

    const runners = await cli('fleet', 'runners');
    expect(runners.stdout).toMatch(/^runner\s+group\s+load\s+slots\s+state/m);
    expect(runners.stdout).toMatch(/cli-runner\s+-\s+1\/2\s+1\/1\s+online/);
    const rj = JSON.parse((await cli('fleet', 'runners', '--json')).stdout);
    expect(rj.runners[0]).toMatchObject({ id: 'r-cli', name: 'cli-runner', load: { used: 1, max: 2 }, slots: { used: 1, max: 1 }, leases: 1, state: 'online', drained: false });
  });

  it('refuses a bad interval, naming it, exit 2', async () => {
    const bad = await cli('admin', 'queue', '--watch', '--interval', 'soon');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--interval/);
  });

  it('--watch without a terminal prints one NDJSON snapshot per interval with the --json fields, and exits 0 on SIGTERM and SIGINT', async () => {
    const keys = Object.keys(JSON.parse((await cli('admin', 'queue', '--json')).stdout)).sort();
    for (const sig of ['SIGTERM', 'SIGINT'] as const) {
      const p = new CliProcess(['admin', 'queue', '--watch', '--interval', '0.3', '--database-url', db.current.url]);
      try {
        const lines = () => p.output.split('\n').filter((l) => l.startsWith('{'));
        await waitFor(() => lines().length >= 2, { what: 'two NDJSON lines', timeoutMs: 30_000 });
        for (const l of lines().slice(0, 2)) expect(Object.keys(JSON.parse(l)).sort()).toEqual(keys);
        expect(await p.stop(sig)).toBe(0);
      } finally {
        await p.stop('SIGKILL');
      }
    }
  });

  it('--watch --server reads the same view over HTTP, one NDJSON line per interval', async () => {
    const server = await startTestServer(db.current.url, { plan: { ops: true } });
    const token = (await tokenCreate(db.current.pool, { kind: 'admin', name: 'watch', scope: 'read' })).secret;
    const local = JSON.parse((await cli('admin', 'queue', '--json')).stdout);
    const p = new CliProcess(['admin', 'queue', '--watch', '--interval', '0.3', '--server', server.url, '--token', token], { OPSCHAIN_HOME: '/nonexistent-opschain-home' });
    try {
      const lines = () => p.output.split('\n').filter((l) => l.startsWith('{'));
      await waitFor(() => lines().length >= 2, { what: 'two NDJSON lines over HTTP', timeoutMs: 30_000 });
      const remote = JSON.parse(lines()[0]);
      expect(Object.keys(remote).sort()).toEqual(Object.keys(local).sort());
      expect(remote.lanes.map((l: any) => l.ready)).toEqual(local.lanes.map((l: any) => l.ready));
      expect(remote.leases.items.map((l: any) => l.stepId)).toEqual(local.leases.items.map((l: any) => l.stepId));
      expect(await p.stop('SIGTERM')).toBe(0);
    } finally {
      await p.stop('SIGKILL');
      await server.stop();
    }
  });
});
