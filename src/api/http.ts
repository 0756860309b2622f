import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyRequest, type RouteOptions } from 'fastify';
import { traceLogFields } from '../core/trace-ids.js';
import type { Logger } from '../logger.js';
import { installErrorHandler } from './errors.js';
import type { Readiness } from './readiness.js';
import { BODY_LIMIT } from './schema.js';

export interface HttpDeps {
  log: Logger;
  readiness: Readiness;
  version: string;
  replicaId: string;
  /** The longest a request may legitimately stay silent (the acquire long poll); default 50 s. */
  pollWindowMs?: number;
  /** Whether the request carries a live admin token: only then do the health endpoints show details. */
  isAdmin?: (req: FastifyRequest) => Promise<boolean>;
}

/** One route as registered, for the fuzz tier and the route table in docs/security.md. */
export interface RouteRecord {
  method: string;
  url: string;
  schema?: RouteOptions['schema'];
  bodyLimit?: number;
}

const routeTables = new WeakMap<FastifyInstance, RouteRecord[]>();

/** Every route registered on an app built by createHttpServer, in registration order. */
export function registeredRoutes(app: FastifyInstance): RouteRecord[] {
  return [...(routeTables.get(app) ?? [])];
}

/**
 * A request Node's HTTP parser refuses before any route sees it (headers past the size limit, a
 * request not sent in time, bytes that are not HTTP) still gets the one error body
 * `{"error": {"code", "message"}}`, so a client reads every refusal the same way; then the socket
 * is closed, as the parser cannot go on with it.
 */
function clientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', `request headers larger than ${maxHeaderSize} bytes`]
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', `request not received whole within ${REQUEST_TIMEOUT_MS / 1000} s`]
        : [400, 'bad_request', 'malformed HTTP request'];
  const body = JSON.stringify({ error: { code, message } });
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
}

/** How long a client has to send a whole request (headers and body). */
export const REQUEST_TIMEOUT_MS = 30_000;

/** How often a closing server looks for sockets that serve no request. */
export const CLOSE_SWEEP_MS = 100;

/**
 * Node's server.close() destroys the keep-alive sockets idle at that moment, then waits for every
 * other one, and no longer times any out: a request in flight as the close began leaves its socket
 * idle afterwards (72 s of keep-alive), and a client that connected and has sent nothing yet holds
 * its socket open for good. So, once closing, every answer says `connection: close`, and every
 * socket not serving a request is destroyed, now and as others finish theirs.
 */
function closeConnectionsOnShutdown(app: FastifyInstance): void {
  const sockets = new Set<Socket>();
  const serving = new Map<Socket, number>();
  app.server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    serving.set(socket, (serving.get(socket) ?? 0) + 1);
    res.once('close', () => {
      const left = (serving.get(socket) ?? 1) - 1;
      if (left > 0) serving.set(socket, left);
      else serving.delete(socket);
    });
  });
  let sweep: NodeJS.Timeout | undefined;
  const destroyUnused = () => {
    for (const socket of sockets) if (!serving.has(socket)) socket.destroy();
  };
  app.addHook('preClose', async () => {
    sweep = setInterval(destroyUnused, CLOSE_SWEEP_MS);
    sweep.unref();
    app.server.once('close', () => clearInterval(sweep));
  });
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (sweep) reply.header('connection', 'close');
    done(null, payload);
  });
}

/**
 * The fastify instance with the health endpoints; feature modules register their routes on it.
 * Bounded by default (fastify's own defaults are not): a request must arrive whole within 30 s, a
 * socket silent for longer than the poll window plus a minute is closed, and a body is at most
 * BODY_LIMIT.small unless its route says otherwise.
 */
export function createHttpServer(deps: HttpDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.log.child({ component: 'http' }, { level: 'warn' }) as any,
    // Unknown fields are errors and types are never coerced: a typo must not be silently accepted.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false } },
    bodyLimit: BODY_LIMIT.small,
    requestTimeout: REQUEST_TIMEOUT_MS,
    connectionTimeout: (deps.pollWindowMs ?? 50_000) + 60_000,
    keepAliveTimeout: 72_000,
    // `__proto__` and `constructor.prototype` in a JSON body are refused (400), never merged.
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    routerOptions: { maxParamLength: 200 },
    clientErrorHandler: clientError,
    // A request that carries a W3C traceparent logs under its trace: the lines join the trace.
    childLoggerFactory: (logger, bindings, opts, raw) => logger.child({ ...bindings, ...traceLogFields(raw.headers.traceparent) }, opts),
  });
  const routes: RouteRecord[] = [];
  routeTables.set(app, routes);
  app.addHook('onRoute', (r) => {
    for (const method of [r.method].flat()) routes.push({ method, url: r.url, schema: r.schema, bodyLimit: r.bodyLimit });
  });
  installErrorHandler(app);
  closeConnectionsOnShutdown(app);
  const isAdmin = async (req: FastifyRequest) => (deps.isAdmin ? deps.isAdmin(req).catch(() => false) : false);
  // Anonymous callers learn that the replica lives and which checks fail, never the host name,
  // version or the store's error text; an admin token shows the details.
  app.get('/healthz', async (req) => (await isAdmin(req) ? { status: 'ok', replica: deps.replicaId, version: deps.version } : { status: 'ok' }));
  app.get('/readyz', async (req, reply) => {
    const { ready, checks } = await deps.readiness.evaluate();
    const failing = checks.filter((c) => !c.ok).map((c) => c.name);
    reply.code(ready ? 200 : 503);
    const status = ready ? 'ready' : 'not ready';
    if (await isAdmin(req)) return { status, failing, checks, replica: deps.replicaId };
    return { status, failing, checks: checks.map((c) => ({ name: c.name, ok: c.ok })) };
  });
  return app;
}
