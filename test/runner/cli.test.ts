import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CliProcess, runCli } from '../support/cli.js';
import { waitFor } from '../support/db.js';
import { FakeRunnerApi } from './fake-runner-api.js';

describe('opschain runner (against a protocol double)', () => {
  const home = mkdtempSync(join(tmpdir(), 'opschain-runner-cli-'));
  let api: FakeRunnerApi | undefined;
  let proc: CliProcess | undefined;
  afterEach(async () => {
    await proc?.stop('SIGKILL');
    proc = undefined;
    await api?.stop();
    api = undefined;
  });
  afterAll(() => rmSync(home, { recursive: true, force: true }));
  const env = (h: string) => ({ OPSCHAIN_HOME: h, OPSCHAIN_SERVER: '', OPSCHAIN_REGISTRATION_TOKEN: '' });

  it('with no server anywhere it says how to get one, exit 2', async () => {
    const r = await runCli(['runner', '--once'], env(join(home, 'none')));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no server: pass --server URL/);
  });

  it('with no identity and no registration token it says where to get one, exit 2', async () => {
    api = new FakeRunnerApi();
    await api.start();
    const r = await runCli(['runner', '--server', api.url, '--name', 'r0'], env(join(home, 'notoken')));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no registration token/);
  });

  it('registers once, keeps its identity 0600, and a restart reuses it', async () => {
    api = new FakeRunnerApi();
    await api.start();
    const h = join(home, 'ident');
    api.offer({ step_id: 1, command: 'echo one' });
    const first = await runCli(['runner', '--server', `${api.url},http://127.0.0.1:1`, '--registration-token', 'ocreg_good', '--name', 'r1', '--label', 'linux', '--once'], env(h));
    expect(first.code, first.stdout + first.stderr).toBe(0);
    const file = join(h, 'runner', 'r1.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ runnerId: 'rnr_fake', credential: 'ocrnr_fake', name: 'r1' });
    expect(api.callsTo('register')[0].body).toMatchObject({ registration_token: 'ocreg_good', name: 'r1', labels: ['linux'], executors: ['shell'], max_parallel_steps: 1, protocol_version: 1 });
    expect(api.completions).toEqual([{ step_id: 1, token: 't1', exit_code: 0 }]);

    api.offer({ step_id: 2, command: 'echo two' });
    const second = await runCli(['runner', '--server', api.url, '--name', 'r1', '--once'], env(h));
    expect(second.code, second.stdout + second.stderr).toBe(0);
    expect(api.callsTo('register')).toHaveLength(1);
    expect(api.callsTo('acquire').at(-1)!.auth).toBe('Bearer ocrnr_fake');
    expect(second.stdout).toMatch(/resumed its identity/);
  });

  it('a second process with the same name and home is refused while the first runs', async () => {
    api = new FakeRunnerApi();
    await api.start();
    const h = join(home, 'lock');
    proc = new CliProcess(['runner', '--server', api.url, '--registration-token', 'ocreg_good', '--name', 'r3'], env(h));
    await waitFor(() => api!.callsTo('acquire').length > 0, { what: 'first poll' });
    const second = await runCli(['runner', '--server', api.url, '--name', 'r3'], env(h));
    expect(second.code).toBe(2);
    expect(second.stderr).toMatch(new RegExp(`already running as pid ${proc.child.pid}`));
    expect(proc.running).toBe(true);
  });

  it('SIGTERM while idle exits 0 promptly; credential invalid exits 1 with a clear message', async () => {
    api = new FakeRunnerApi();
    await api.start();
    const h = join(home, 'signals');
    proc = new CliProcess(['runner', '--server', api.url, '--registration-token', 'ocreg_good', '--name', 'r2'], env(h));
    await waitFor(() => api!.callsTo('acquire').length > 0, { what: 'first poll' });
    expect(await proc.stop('SIGTERM')).toBe(0);

    api.credentialValid = false;
    proc = new CliProcess(['runner', '--server', api.url, '--name', 'r2'], env(h));
    expect(await proc.waitExit()).toBe(1);
    expect(proc.output).toMatch(/credential invalid: .* no longer knows runner rnr_fake/);
  });
});
