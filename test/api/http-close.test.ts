import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createHttpServer } from '../../src/api/http.js';
import { Readiness } from '../../src/api/readiness.js';
import { createLogger } from '../../src/logger.js';

/**
 * A server's close must not wait on keep-alive sockets: a request in flight as the close began
 * would otherwise leave its socket idle afterwards, and Node's close waits out keepAliveTimeout
 * (72 s) for it; a replica's stop is promised within 10 s.
 */
describe('closing the HTTP server with a request in flight', () => {
  let app: FastifyInstance | undefined;
  const agent = new Agent({ keepAlive: true, keepAliveMsecs: 60_000 });
  afterEach(async () => {
    agent.destroy();
    await app?.close().catch(() => {});
  });

  function post(port: number, path: string): Promise<{ status: number; connection: string | undefined; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, connection: res.headers.connection, body }));
      });
      req.on('error', reject);
      req.end('{}');
    });
  }

  it('answers it with connection: close and ends within seconds, not the keep-alive timeout', async () => {
    app = createHttpServer({ log: createLogger('silent', { pretty: false }), readiness: new Readiness(), version: 'test', replicaId: 'r-1' });
    // Each request parks in the handler until the test releases it.
    const parked: Array<() => void> = [];
    let arrived: (() => void) | undefined;
    app.post('/slow', async () => {
      await new Promise<void>((release) => {
        parked.push(release);
        arrived?.();
      });
      return { ok: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const nextArrival = () => new Promise<void>((r) => (arrived = r));

    // A first answer leaves a kept-alive socket in the agent; the second request reuses it.
    let arrival = nextArrival();
    const first = post(port, '/slow');
    await arrival;
    parked.shift()!();
    expect(await first).toMatchObject({ status: 200 });
    expect((await first).connection).not.toBe('close');

    arrival = nextArrival();
    const second = post(port, '/slow');
    await arrival;
    const closing = Date.now();
    const closed = app.close();
    // The close has begun (its preClose hooks ran) while the request is still in its handler.
    await new Promise((r) => setTimeout(r, 200));
    parked.shift()!();
    expect(await second).toMatchObject({ status: 200, connection: 'close' });
    await closed;
    // Generous for a loaded machine; without the sweep this is the 72 s keep-alive timeout.
    expect(Date.now() - closing).toBeLessThan(10_000);
    app = undefined;
  }, 30_000);

  it('does not wait on a client that connected and sent nothing', async () => {
    app = createHttpServer({ log: createLogger('silent', { pretty: false }), readiness: new Readiness(), version: 'test', replicaId: 'r-1' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const silent = connect({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => silent.once('connect', resolve).once('error', reject));
    const ended = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    silent.on('error', () => {});
    // The server has accepted it: Node counts it as a connection waiting for its request.
    await new Promise<void>((resolve) => {
      const look = () => app!.server.getConnections((_e, n) => (n > 0 ? resolve() : setTimeout(look, 10)));
      look();
    });
    const closing = Date.now();
    await app.close();
    // Without the sweep Node waits for this socket for good (its header timer stops at close).
    expect(Date.now() - closing).toBeLessThan(10_000);
    await ended;
    app = undefined;
  }, 30_000);
});
