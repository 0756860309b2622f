import { createServer } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { CallAbortedError, CredentialInvalidError, ProtocolError, RunnerClient } from '../../src/runner/client.js';
import { FakeRunnerApi } from './fake-runner-api.js';

const log = createLogger('silent', { pretty: false });
const fast = { baseMs: 1, maxMs: 5 };

/** A loopback port nothing listens on: connection refused, like a stopped server. */
async function deadUrl(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return `http://127.0.0.1:${port}`;
}

describe('runner protocol client', () => {
  const apis: FakeRunnerApi[] = [];
  async function api(): Promise<FakeRunnerApi> {
    const a = new FakeRunnerApi();
    await a.start();
    apis.push(a);
    return a;
  }
  afterEach(async () => {
    await Promise.all(apis.splice(0).map((a) => a.stop()));
  });

  it('an acquire whose answer is lost is retried with the same request id and gets the same offers', async () => {
    const a = await api();
    a.offer({ step_id: 7 }, { step_id: 8 });
    a.failNext('acquire', 'drop-after');
    const client = new RunnerClient({ servers: [a.url], credential: 'ocrnr_x', log, backoff: fast });
    const offers = await client.acquire({ request_id: 'req-1', max_offers: 4, wait_ms: 500 });
    expect(offers.map((o) => o.step_id)).toEqual([7, 8]);
    const calls = a.callsTo('acquire');
    expect(calls).toHaveLength(2);
    expect(calls.map((c) => c.body.request_id)).toEqual(['req-1', 'req-1']);
    expect(calls[0].auth).toBe('Bearer ocrnr_x');
  });

  it('a fresh acquire says so on its first send only: the retry asks the server to look for the answer it lost', async () => {
    const a = await api();
    a.offer({ step_id: 9 });
    a.failNext('acquire', 'drop-after');
    const client = new RunnerClient({ servers: [a.url], credential: 'ocrnr_x', log, backoff: fast });
    const offers = await client.acquire({ request_id: 'req-2', max_offers: 1, wait_ms: 500, ack_on_delivery: true, fresh: true });
    expect(offers.map((o) => o.step_id)).toEqual([9]);
    expect(a.callsTo('acquire').map((c) => c.body)).toEqual([
      { request_id: 'req-2', max_offers: 1, wait_ms: 500, ack_on_delivery: true, fresh: true },
      { request_id: 'req-2', max_offers: 1, wait_ms: 500, ack_on_delivery: true },
    ]);
  });

  it('a log batch answered 500 again and again is refused for good, not retried for ever', async () => {
    const a = await api();
    a.failNext('logs', { status: 500, error: 'internal error' }, { status: 500, error: 'internal error' }, { status: 500, error: 'internal error' }, { status: 500, error: 'internal error' });
    const client = new RunnerClient({ servers: [a.url], credential: 'c', log, backoff: fast });
    const err = await client.logs(1, 't1', [{ stream: 'stdout', text: 'x' }]).catch((e) => e);
    expect(err).toBeInstanceOf(ProtocolError);
    expect(err.message).toMatch(/logs: HTTP 500: internal error \(3 times; not retried further\)/);
    expect(a.callsTo('logs')).toHaveLength(3);
  });

  it('when calls fail, a client whose server came from the home follows the address recorded there now', async () => {
    const dead = await deadUrl();
    const moved = await api();
    let recorded = dead;
    const client = new RunnerClient({ servers: [dead], credential: 'c', log, backoff: fast, rediscover: () => [recorded] });
    recorded = `${moved.url}/`;
    expect(await client.renew([{ step_id: 1, token: 't1' }])).toEqual([{ step_id: 1, ok: true }]);
    expect(client.server).toBe(moved.url);
    expect(moved.callsTo('renew')).toHaveLength(1);
  });

  it('503 and dropped connections are retried until the server answers', async () => {
    const a = await api();
    a.failNext('renew', { status: 503, error: "store unavailable: connection refused (this server's readiness check 'store' is failing; retry)" }, 'drop-before', { status: 503, error: 'store unavailable: x' });
    const client = new RunnerClient({ servers: [a.url], credential: 'c', log, backoff: fast });
    const results = await client.renew([{ step_id: 1, token: 't1' }]);
    expect(results).toEqual([{ step_id: 1, ok: true }]);
    expect(a.callsTo('renew')).toHaveLength(4);
  });

  it('fails over along the server list when a server stops answering, and sticks to the one that works', async () => {
    const dead = await deadUrl();
    const b = await api();
    const client = new RunnerClient({ servers: [dead, b.url], credential: 'c', log, backoff: fast });
    expect(client.server).toBe(dead);
    await client.ack([{ step_id: 1, token: 't1' }]);
    expect(client.server).toBe(b.url);
    await client.renew([{ step_id: 1, token: 't1' }]);
    expect(b.calls.map((c) => c.path)).toEqual(['ack', 'renew']);
    expect(client.server).toBe(b.url);
  });

  it('goes back to its first server once FAIL_BACK_MS has passed on a later one, and on again if it still fails', async () => {
    const a = await api();
    const b = await api();
    let now = 0;
    const clock = { now: () => now, sleep: async () => {} };
    const client = new RunnerClient({ servers: [a.url, b.url], credential: 'c', log, backoff: fast, clock, failBackMs: 30_000 });
    a.failNext('ack', { status: 503, error: 'store unavailable: x' });
    await client.ack([{ step_id: 1, token: 't1' }]);
    expect(client.server).toBe(b.url);
    now += 29_999;
    await client.renew([{ step_id: 1, token: 't1' }]);
    expect(client.server).toBe(b.url);
    now += 1;
    await client.renew([{ step_id: 1, token: 't1' }]);
    expect(client.server).toBe(a.url);
    expect(a.calls.map((c) => c.path)).toEqual(['ack', 'renew']);
    expect(b.calls.map((c) => c.path)).toEqual(['ack', 'renew']);
    // Still failing: one round trip there, then on to the next, and the next try is a period later.
    a.failNext('complete', { status: 503, error: 'store unavailable: x' });
    now += 30_000;
    await client.complete([{ step_id: 1, token: 't1', exit_code: 0 }]);
    expect(client.server).toBe(b.url);
    now += 10_000;
    await client.renew([{ step_id: 2, token: 't2' }]);
    expect(client.server).toBe(b.url);
  });

  it('a server answering 503 is left for the next one', async () => {
    const a = await api();
    const b = await api();
    a.failNext('complete', { status: 503, error: 'store unavailable: x' });
    const client = new RunnerClient({ servers: [a.url, b.url], credential: 'c', log, backoff: fast });
    const r = await client.complete([{ step_id: 3, token: 't3', exit_code: 0 }]);
    expect(r[0].ok).toBe(true);
    expect(b.completions).toEqual([{ step_id: 3, token: 't3', exit_code: 0 }]);
    expect(client.server).toBe(b.url);
  });

  it('verdicts come back exactly: 409 per item and on logs, 401 throws, 400 throws', async () => {
    const a = await api();
    a.revoked.add('t2');
    const client = new RunnerClient({ servers: [a.url], credential: 'c', log, backoff: fast });
    expect(await client.renew([{ step_id: 1, token: 't1' }, { step_id: 2, token: 't2' }])).toEqual([
      { step_id: 1, ok: true },
      { step_id: 2, ok: false, status: 409, error: 'lease expired or revoked' },
    ]);
    expect(await client.logs(2, 't2', [{ stream: 'stdout', text: 'x' }])).toBe('lost');
    expect(await client.logs(1, 't1', [{ stream: 'stdout', text: 'x' }])).toBe('ok');
    a.failNext('ack', { status: 400, error: 'leases[0].token: required' });
    await expect(client.ack([{ step_id: 1, token: '' }])).rejects.toBeInstanceOf(ProtocolError);
    a.credentialValid = false;
    await expect(client.renew([{ step_id: 1, token: 't1' }])).rejects.toBeInstanceOf(CredentialInvalidError);
  });

  it('retries end when the caller aborts', async () => {
    const dead = await deadUrl();
    const client = new RunnerClient({ servers: [dead], credential: 'c', log, backoff: { baseMs: 20, maxMs: 20 } });
    const stop = new AbortController();
    const p = client.renew([{ step_id: 1, token: 't' }], stop.signal);
    setTimeout(() => stop.abort(), 100);
    await expect(p).rejects.toBeInstanceOf(CallAbortedError);
  });
});
