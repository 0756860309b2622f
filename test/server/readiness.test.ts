import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { ServerHandle } from '../../src/server.js';
import { freePort, startEmbeddedStore, type EmbeddedStore } from '../../src/store/embedded.js';
import { useTestDatabase, waitFor } from '../support/db.js';
import { startTestServer } from '../support/server.js';
import { TcpProxy } from '../support/tcp-proxy.js';
import { withHostPort } from '../support/urls.js';

async function readyz(server: ServerHandle): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/readyz`, { signal: AbortSignal.timeout(10_000) });
  return { status: res.status, body: await res.json() };
}

describe('readiness', () => {
  const db = useTestDatabase();
  let server: ServerHandle | undefined;
  let proxy: TcpProxy | undefined;
  afterEach(async () => {
    await server?.stop();
    await proxy?.stop();
    server = proxy = undefined;
  });

  async function proxied() {
    const u = new URL(db.current.url);
    proxy = new TcpProxy(u.hostname, Number(u.port || 5432));
    const port = await proxy.start();
    server = await startTestServer(withHostPort(db.current.url, '127.0.0.1', port));
    return { proxy, server };
  }

  it('is ready on a fresh start, and liveness answers', async () => {
    server = await startTestServer(db.current.url);
    expect((await readyz(server)).status).toBe(200);
    const live = await fetch(`${server.url}/healthz`);
    expect(live.status).toBe(200);
    expect(await live.json()).toEqual({ status: 'ok' });
  });

  it('turns 503 store while PostgreSQL hangs, and recovers by itself', async () => {
    const { proxy, server } = await proxied();
    expect((await readyz(server)).status).toBe(200);
    proxy.blackhole();
    const started = Date.now();
    const down = await waitFor(async () => {
      const r = await readyz(server);
      return r.status === 503 ? r : undefined;
    }, { timeoutMs: 15_000, what: 'readiness 503' });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(down!.body.failing).toEqual(['store']);
    proxy.heal();
    await waitFor(async () => (await readyz(server)).status === 200, { timeoutMs: 30_000, what: 'readiness back to 200' });
  });

  it('turns 503 store while connections are refused, and recovers by itself', async () => {
    const { proxy, server } = await proxied();
    proxy.refuse();
    const down = await waitFor(async () => {
      const r = await readyz(server);
      return r.status === 503 ? r : undefined;
    }, { timeoutMs: 15_000, what: 'readiness 503' });
    expect(down!.body.checks).toContainEqual(expect.objectContaining({ name: 'store', ok: false }));
    proxy.heal();
    await waitFor(async () => (await readyz(server)).status === 200, { timeoutMs: 30_000, what: 'readiness back to 200' });
  });
});

describe('readiness against a PostgreSQL that really stops', () => {
  const dir = mkdtempSync(join(tmpdir(), 'opschain-stop-'));
  let pg: EmbeddedStore | undefined;
  let server: ServerHandle | undefined;
  afterAll(async () => {
    await server?.stop();
    await pg?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('goes 503 when the server stops and 200 when it is back', async () => {
    const port = await freePort();
    pg = await startEmbeddedStore({ home: dir, record: false, port });
    server = await startTestServer(pg.url);
    expect((await readyz(server)).status).toBe(200);
    await pg.stop();
    await waitFor(async () => (await readyz(server!)).status === 503, { timeoutMs: 15_000, what: 'readiness 503' });
    expect((await readyz(server)).body.failing).toEqual(['store']);
    // The same cluster, same password (kept in memory by the test), same port.
    pg = await startEmbeddedStore({ home: dir, record: false, port, password: new URL(pg.url).password });
    await waitFor(async () => (await readyz(server!)).status === 200, { timeoutMs: 30_000, what: 'readiness back to 200' });
  });
});
