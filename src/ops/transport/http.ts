import { Conflict, DomainError, Failed, Forbidden, Invalid, NotFound, TimedOut, Unauthorized, Unavailable } from '../../errors.js';
import { nodeFetch, type FetchAnswer, type FetchLike } from './http-request.js';
import type { Ops } from '../index.js';
import { pathParams, VERBS, type Verb, type VerbSpec } from '../verb-specs.js';

export interface HttpOpsOptions {
  /** Base URL of any replica, e.g. http://opschain.internal:7420. */
  server: string;
  token?: string;
  /** Per request, beyond a long poll's own wait. */
  timeoutMs?: number;
  /** How requests are sent (default: one node:http request each). */
  fetch?: FetchLike;
}

/** The HTTP status → domain error kind, the inverse of src/api/errors.ts. */
function errorFromResponse(status: number, body: any, server: string): DomainError {
  const e = body?.error;
  const code = typeof e?.code === 'string' ? e.code : undefined;
  const message = typeof e?.message === 'string' ? e.message : typeof e === 'string' ? e : `HTTP ${status} from ${server}`;
  const details = e && typeof e === 'object' ? Object.fromEntries(Object.entries(e).filter(([k]) => k !== 'code' && k !== 'message')) : undefined;
  switch (status) {
    case 400:
      return new Invalid(message, code, details && Object.keys(details).length ? details : undefined);
    case 401:
      return new Unauthorized(`${message} (server ${server}; pass --token or set OPSCHAIN_TOKEN)`, code);
    case 403:
      return new Forbidden(message, code);
    case 404:
      return new NotFound(message, code);
    case 409:
      return new Conflict(message, code);
    case 422:
      return new Failed(message, code);
    case 503:
      return new Unavailable(`${message} (server ${server})`, code ?? 'unavailable');
    case 504:
      return new TimedOut(message, code);
    default:
      return new DomainError('failed', `server ${server} answered HTTP ${status}: ${message}`, code ?? 'server_error');
  }
}

function transportCause(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

/** The request for one verb's input: path params substituted, the rest in the query or the body. */
export function verbRequest(spec: VerbSpec, input: Record<string, unknown>): { path: string; query: URLSearchParams; body?: string } {
  const params = pathParams(spec.path);
  const path = spec.path.replace(/:([A-Za-z]+)/g, (_, name: string) => encodeURIComponent(String(input[name] ?? '')));
  const rest = Object.fromEntries(Object.entries(input).filter(([k, v]) => !params.includes(k) && v !== undefined));
  const query = new URLSearchParams();
  if (spec.method === 'POST') return { path, query, body: JSON.stringify(rest) };
  for (const [k, v] of Object.entries(rest)) query.set(k, String(v));
  return { path, query };
}

/**
 * The HTTP transport: each verb is one request to a server's API (VERBS says which), answered by
 * the same domain function the store transport calls. Errors come back as the same domain errors;
 * a server that cannot be reached is Unavailable, naming it and how to start one.
 */
export function httpOps(opts: HttpOpsOptions): Ops {
  const server = opts.server.replace(/\/+$/, '');
  const doFetch = opts.fetch ?? nodeFetch;
  const call = async (verb: Verb, input: Record<string, unknown>): Promise<unknown> => {
    const spec = VERBS[verb];
    const req = verbRequest(spec, input ?? {});
    const qs = req.query.toString();
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (req.body !== undefined) headers['content-type'] = 'application/json';
    const wait = spec.longPoll ? Number(input?.waitMs ?? 0) : 0;
    let res: FetchAnswer;
    try {
      res = await doFetch(`${server}${req.path}${qs ? `?${qs}` : ''}`, {
        method: spec.method,
        headers,
        body: req.body,
        signal: AbortSignal.timeout(wait + (opts.timeoutMs ?? 30_000)),
      });
    } catch (err) {
      throw new Unavailable(
        `server unavailable: ${server} cannot be reached (${transportCause(err)}); start it with 'opschain server start', or point --server / OPSCHAIN_SERVER at a running one`,
        'server_unavailable',
      );
    }
    const text = await res.text();
    let body: unknown;
    let json = true;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      json = false;
    }
    // Every answer of the API is JSON, and every refusal an {error: {code, message}} body: anything
    // else (a web page, a proxy's error) came from some other server at that address.
    const refusal = (body as { error?: { code?: unknown } } | undefined)?.error;
    if (!json || (!res.ok && (typeof refusal !== 'object' || refusal === null || typeof refusal.code !== 'string'))) {
      const type = (res.headers.get('content-type') ?? 'no content type').split(';')[0].trim();
      throw new Unavailable(
        `not an opschain server at ${server} (HTTP ${res.status}, ${type}); point --server / OPSCHAIN_SERVER at an opschain server`,
        'not_opschain',
      );
    }
    if (!res.ok) throw errorFromResponse(res.status, body, server);
    return body;
  };
  const ops: Record<string, (input: unknown) => Promise<unknown>> = {};
  for (const verb of Object.keys(VERBS) as Verb[]) ops[verb] = (input) => call(verb, (input ?? {}) as Record<string, unknown>);
  return ops as unknown as Ops;
}
