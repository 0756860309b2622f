import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeServerRecord } from '../../src/home.js';
import { backoffDelay, parseRetryAfterMs, renewIntervalMs, retryAfterDelay } from '../../src/core/retry-backoff.js';
import { parsePassEnv, resolveStepUser } from '../../src/runner/step-env.js';
import { parseServerList, resolveServers, resolveWorkDir, RunnerSetupError } from '../../src/runner/start.js';

describe('runner settings', () => {
  const home = mkdtempSync(join(tmpdir(), 'opschain-start-'));
  afterAll(() => rmSync(home, { recursive: true, force: true }));

  it('--server takes repeats and comma lists, in order, once each, and refuses what is not an http URL', () => {
    expect(parseServerList(['http://a:1, http://b:2/', 'http://c:3', 'http://a:1'])).toEqual(['http://a:1', 'http://b:2', 'http://c:3']);
    expect(() => parseServerList(['a:1'])).toThrow(RunnerSetupError);
    expect(() => parseServerList(['ftp://a'])).toThrow(/expected an http/);
  });

  it('servers come from the flags, then OPSCHAIN_SERVER, then the server this machine runs', () => {
    const none = join(home, 'none');
    expect(() => resolveServers({ servers: [], home: none, env: {} })).toThrow(/no server: pass --server/);
    writeServerRecord(home, { url: 'http://127.0.0.1:7420', pid: 1, replicaId: 'r', startedAt: '' });
    expect(resolveServers({ servers: [], home, env: {} })).toEqual(['http://127.0.0.1:7420']);
    expect(resolveServers({ servers: [], home, env: { OPSCHAIN_SERVER: 'http://x:1,http://y:2' } })).toEqual(['http://x:1', 'http://y:2']);
    expect(resolveServers({ servers: ['http://z:3'], home, env: { OPSCHAIN_SERVER: 'http://x:1' } })).toEqual(['http://z:3']);
  });

  it('backoff doubles up to its ceiling and never waits less than half of it', () => {
    const policy = { baseMs: 250, maxMs: 10_000 };
    expect([1, 2, 3].map((n) => backoffDelay(n, 0, policy))).toEqual([125, 250, 500]);
    expect([1, 2, 3].map((n) => backoffDelay(n, 1, policy))).toEqual([250, 500, 1000]);
    expect(backoffDelay(50, 1, policy)).toBe(10_000);
    expect(backoffDelay(50, 0, policy)).toBe(5_000);
  });

  it('Retry-After is honoured: never sooner than asked, at most half again later, never under the earned backoff', () => {
    expect(retryAfterDelay(1_000, 125, 0)).toBe(1_000);
    expect(retryAfterDelay(1_000, 125, 1)).toBe(1_500);
    expect(retryAfterDelay(1_000, 4_000, 0.5)).toBe(4_000);
    expect(parseRetryAfterMs('2', 0)).toBe(2_000);
    expect(parseRetryAfterMs(' 0 ', 0)).toBe(0);
    expect(parseRetryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(parseRetryAfterMs('86400', 0)).toBe(300_000);
    for (const bad of [null, undefined, '', 'soon', '-1']) expect(parseRetryAfterMs(bad, 0)).toBeUndefined();
  });

  it('renewals: the offer interval, capped at 60 s and a third of the TTL', () => {
    expect(renewIntervalMs({ renew_interval_ms: 60_000, lease_ttl_ms: 180_000 })).toBe(60_000);
    expect(renewIntervalMs({ renew_interval_ms: 60_000, lease_ttl_ms: 3_000 })).toBe(1_000);
    expect(renewIntervalMs({ renew_interval_ms: 90_000, lease_ttl_ms: 600_000 })).toBe(60_000);
    expect(renewIntervalMs({ renew_interval_ms: 5_000, lease_ttl_ms: 180_000 })).toBe(5_000);
  });

  it('keeps step work directories out of the home, and opschain\'s own variables out of --pass-env', () => {
    expect(() => resolveWorkDir('/h/.opschain/work', '/h/.opschain', 'r1')).toThrow(/overlaps the opschain home \/h\/.opschain, which holds secrets/);
    expect(() => resolveWorkDir('/h/.opschain', '/h/.opschain', 'r1')).toThrow(/overlaps/);
    expect(resolveWorkDir('/srv/work', '/h/.opschain', 'r1')).toBe('/srv/work');
    expect(resolveWorkDir(undefined, '/h/.opschain', 'r/1')).toMatch(/opschain-work-\d+\/r_1$/);
    expect(parsePassEnv(['AWS_*,GIT_SSH', 'GIT_SSH'])).toEqual(['AWS_*', 'GIT_SSH']);
    for (const bad of ['OPSCHAIN_TOKEN', 'DATABASE_URL', 'PGPASSWORD']) expect(() => parsePassEnv([bad])).toThrow(/never handed to steps/);
    expect(() => parsePassEnv(['A B'])).toThrow(/expected a variable name/);
    expect(() => resolveStepUser('no-such-user-here')).toThrow(/no such user/);
    expect(() => resolveStepUser('root')).toThrow(/is root/);
  });
});
