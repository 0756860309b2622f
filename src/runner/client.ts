import { systemClock, type Clock } from '../clock.js';
import { backoffDelay, DEFAULT_BACKOFF, parseRetryAfterMs, retryAfterDelay, type BackoffPolicy } from '../core/retry-backoff.js';
import type { Logger } from '../logger.js';
import {
  CREDENTIAL_INVALID,
  LEASE_LOST,
  type AcquireAnswer,
  type AcquireRequest,
  type Completion,
  type ItemResult,
  type LeaseRef,
  type LogChunk,
  type Offer,
  type RegisterRequest,
  type Registration,
  type ReleaseItem,
} from './protocol.js';

/** 401 `credential invalid`: the store says this registration is gone. Nothing to retry. */
export class CredentialInvalidError extends Error {
  constructor(readonly server: string, message = CREDENTIAL_INVALID) {
    super(message);
    this.name = 'CredentialInvalidError';
  }
}

/** A 4xx other than the verdicts (bad body, unknown path): the request itself is wrong. */
export class ProtocolError extends Error {
  constructor(readonly status: number, readonly path: string, message: string) {
    super(`${path}: HTTP ${status}: ${message}`);
    this.name = 'ProtocolError';
  }
}

/** The caller's signal ended the call (shutdown); nothing more will be tried. */
export class CallAbortedError extends Error {
  constructor(path: string) {
    super(`${path}: aborted`);
    this.name = 'CallAbortedError';
  }
}

export interface ClientOptions {
  /** Ordered: the client uses one at a time and moves down the list when it stops answering. */
  servers: string[];
  credential?: string;
  log: Logger;
  clock?: Clock;
  random?: () => number;
  backoff?: BackoffPolicy;
  /** Bound on every call except acquire, whose bound is its wait plus this. */
  requestTimeoutMs?: number;
  /**
   * Where the servers are now, asked when calls fail (the address the local server recorded in
   * the home: a restarted server may listen on a new port). Undefined: keep the list.
   */
  rediscover?: () => string[] | undefined;
  fetch?: typeof fetch;
  /** How long calls stay on a later server before the first is tried again (default FAIL_BACK_MS). */
  failBackMs?: number;
}

/**
 * A runner that failed over tries its first server again after this long. Without it, every
 * replica fault moves runners down their lists for good: a fleet whose runners each prefer a
 * different replica ends up parked on a few, and the shards of a replica none parks on wait for
 * the any-shard lane (SHARD_FALLBACK_MS) instead of going at once.
 */
export const FAIL_BACK_MS = 30_000;

interface CallOptions {
  auth: boolean;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Give up (ProtocolError) after this many 500 answers in a row: the request itself breaks the server. */
  max500s?: number;
  /** The body of every send after the first (a retry), when it differs. */
  retryBody?: unknown;
  /** The step attempt's W3C traceparent: the server's log lines about the call join its trace. */
  traceparent?: string;
}

/** A log batch answered 500 this many times is refused for good: the batch is dropped, the step goes on. */
export const LOG_MAX_500S = 3;

interface CallResult {
  status: number;
  body: any;
}

/** Statuses that mean "this server cannot answer now": retry, here or on the next server. */
const TRANSIENT_STATUSES = new Set([429, 500, 502, 503, 504]);

/**
 * The runner protocol over HTTP. Transient failures (connection refused or reset, timeouts, 503)
 * are retried with backoff and jitter, failing over along the server list and staying on whichever
 * server answers. The verdicts are surfaced exactly: 401 throws CredentialInvalidError, 409 comes
 * back as a per-item result, and retries go on until the call's signal aborts.
 */
export class RunnerClient {
  private servers: string[];
  private current = 0;
  /** When calls left the first server (null while on it). */
  private leftFirstAt: number | null = null;
  private readonly failBackMs: number;
  private credential?: string;
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly backoff: BackoffPolicy;
  private readonly timeoutMs: number;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: ClientOptions) {
    if (opts.servers.length === 0) throw new Error('at least one server URL is required');
    this.servers = opts.servers.map((s) => s.replace(/\/+$/, ''));
    this.credential = opts.credential;
    this.log = opts.log;
    this.clock = opts.clock ?? systemClock;
    this.random = opts.random ?? Math.random;
    this.backoff = opts.backoff ?? DEFAULT_BACKOFF;
    this.timeoutMs = opts.requestTimeoutMs ?? 15_000;
    this.fetchImpl = opts.fetch ?? fetch;
    this.rediscover = opts.rediscover;
    this.failBackMs = opts.failBackMs ?? FAIL_BACK_MS;
  }

  /** A new call after FAIL_BACK_MS on a later server goes to the first one again; if it still fails, on it moves. */
  private failBack(): void {
    if (this.current === 0 || this.leftFirstAt === null || this.clock.now() - this.leftFirstAt < this.failBackMs) return;
    this.log.info({ from: this.server, to: this.servers[0] }, `runner protocol: trying ${this.servers[0]} again`);
    this.current = 0;
    this.leftFirstAt = null;
  }

  private readonly rediscover?: () => string[] | undefined;

  /** Takes a changed server list from rediscover(); true when calls should go elsewhere now. */
  private moveIfRediscovered(): boolean {
    let found: string[] | undefined;
    try {
      found = this.rediscover?.()?.map((s) => s.replace(/\/+$/, ''));
    } catch {
      found = undefined;
    }
    if (!found || found.length === 0 || found.join(',') === this.servers.join(',')) return false;
    this.log.warn({ from: this.servers, to: found }, `runner protocol: the server's recorded address changed to ${found.join(', ')}; calling it there`);
    this.servers = found;
    this.current = 0;
    this.leftFirstAt = null;
    return true;
  }

  /** The server calls go to now. */
  get server(): string {
    return this.servers[this.current];
  }

  setCredential(credential: string): void {
    this.credential = credential;
  }

  async register(req: RegisterRequest, signal?: AbortSignal): Promise<Registration> {
    const r = await this.call('register', req, { auth: false, timeoutMs: this.timeoutMs, signal });
    if (r.status === 409) throw new ProtocolError(409, 'register', errorText(r.body, 'conflict'));
    return r.body as Registration;
  }

  /**
   * One long poll. The caller keeps `request_id` for the SAME logical request: the client retries
   * with it, so an answer lost on the way back returns the same offers instead of stranding them.
   */
  async acquire(req: AcquireRequest, signal?: AbortSignal): Promise<Offer[]> {
    return (await this.acquireCarrying(req, signal)).offers;
  }

  /**
   * An acquire that may carry completions (complete-and-acquire): `results` has one entry per
   * carried completion, in order. Retries are safe: a repeated completion answers ok.
   */
  async acquireCarrying(req: AcquireRequest, signal?: AbortSignal): Promise<AcquireAnswer> {
    const wait = req.wait_ms ?? 50_000;
    // `fresh` says no earlier send of this request id can have been answered; a retry leaves it out.
    const { fresh: _fresh, ...retry } = req;
    const r = await this.call('acquire', req, { auth: true, timeoutMs: wait + this.timeoutMs, signal, retryBody: req.fresh ? retry : undefined });
    const offers = r.status === 204 || !Array.isArray(r.body?.offers) ? [] : (r.body.offers as Offer[]);
    const carried = req.completions ?? [];
    if (carried.length === 0) return { offers };
    return { offers, results: matchResults(carried, r.body?.results) };
  }

  ack(leases: LeaseRef[], signal?: AbortSignal): Promise<ItemResult[]> {
    return this.batch('ack', { leases }, leases, signal);
  }

  renew(leases: LeaseRef[], signal?: AbortSignal): Promise<ItemResult[]> {
    return this.batch('renew', { leases }, leases, signal);
  }

  release(leases: ReleaseItem[], signal?: AbortSignal): Promise<ItemResult[]> {
    return this.batch('release', { leases }, leases, signal);
  }

  complete(completions: Completion[], signal?: AbortSignal): Promise<ItemResult[]> {
    return this.batch('complete', { completions }, completions, signal);
  }

  /**
   * Parks until one of the leases is no longer this runner's (a cancel revoked it) or the window
   * ends; returns the step ids no longer held (none at the window's end).
   */
  async watch(leases: LeaseRef[], waitMs: number | undefined, signal?: AbortSignal): Promise<number[]> {
    const wait = waitMs ?? 50_000;
    const r = await this.call('watch', { leases, ...(waitMs === undefined ? {} : { wait_ms: waitMs }) }, { auth: true, timeoutMs: wait + this.timeoutMs, signal });
    return Array.isArray(r.body?.revoked) ? (r.body.revoked as unknown[]).map(Number) : [];
  }

  /** Appends chunks to the step's log; 'lost' when the lease is fenced, 'full' when the step's log reached its cap. */
  async logs(stepId: number, token: string, chunks: LogChunk[], signal?: AbortSignal, traceparent?: string): Promise<'ok' | 'lost' | 'full'> {
    const r = await this.call('logs', { step_id: stepId, token, chunks }, { auth: true, timeoutMs: this.timeoutMs, signal, max500s: LOG_MAX_500S, traceparent });
    if (r.status === 409) return 'lost';
    return r.body?.truncated === true ? 'full' : 'ok';
  }

  private async batch(path: string, body: unknown, items: LeaseRef[], signal?: AbortSignal): Promise<ItemResult[]> {
    if (items.length === 0) return [];
    const r = await this.call(path, body, { auth: true, timeoutMs: this.timeoutMs, signal });
    if (r.status === 409) {
      // A whole-call 409 fences every item of it.
      return items.map((i) => ({ step_id: i.step_id, ok: false, status: 409, error: errorText(r.body, LEASE_LOST) }));
    }
    return matchResults(items, r.body?.results);
  }

  private async call(path: string, body: unknown, opts: CallOptions): Promise<CallResult> {
    let failures = 0;
    let fiveHundreds = 0;
    const first = JSON.stringify(body);
    const again = opts.retryBody === undefined ? first : JSON.stringify(opts.retryBody);
    this.failBack();
    for (;;) {
      const payload = failures === 0 ? first : again;
      // What the last refusal asked us to wait (429/503 with Retry-After): honoured, with jitter.
      let retryAfterMs: number | undefined;
      if (opts.signal?.aborted) throw new CallAbortedError(path);
      const server = this.server;
      const url = `${server}/api/runner/${path}`;
      let problem: string;
      try {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (opts.auth && this.credential) headers.authorization = `Bearer ${this.credential}`;
        if (opts.traceparent) headers.traceparent = opts.traceparent;
        const timeout = AbortSignal.timeout(opts.timeoutMs);
        const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
        const res = await this.fetchImpl(url, { method: 'POST', headers, body: payload, signal });
        const text = await res.text();
        let parsed: any = undefined;
        if (text) {
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = { error: { code: 'bad_answer', message: text.slice(0, 200) } };
          }
        }
        if (res.status < 300 || res.status === 409) {
          if (failures > 0) this.log.info({ server, path, failures }, `runner protocol: ${server} answers again`);
          return { status: res.status, body: parsed };
        }
        if (res.status === 401) throw new CredentialInvalidError(server, errorText(parsed, CREDENTIAL_INVALID));
        if (!TRANSIENT_STATUSES.has(res.status)) throw new ProtocolError(res.status, path, errorText(parsed, res.statusText));
        if (res.status === 500 && opts.max500s !== undefined && ++fiveHundreds >= opts.max500s) {
          throw new ProtocolError(500, path, `${errorText(parsed, res.statusText)} (${fiveHundreds} times; not retried further)`);
        }
        problem = `HTTP ${res.status}: ${errorText(parsed, res.statusText)}`;
        retryAfterMs = parseRetryAfterMs(res.headers.get('retry-after'), Date.now());
      } catch (err) {
        if (err instanceof CredentialInvalidError || err instanceof ProtocolError) throw err;
        if (opts.signal?.aborted) throw new CallAbortedError(path);
        problem = describeTransportError(err);
      }
      failures++;
      // The server may have restarted elsewhere: follow its recorded address at once.
      if (this.moveIfRediscovered()) continue;
      const previous = server;
      if (this.servers.length > 1 && this.server === previous) {
        if (this.current === 0) this.leftFirstAt = this.clock.now();
        this.current = (this.current + 1) % this.servers.length;
      }
      const moved = this.server !== previous;
      const level = failures === 1 || moved || failures % 10 === 0 ? 'warn' : 'debug';
      this.log[level]({ server: previous, path, problem, failures, next: this.server }, `runner protocol: ${path} on ${previous} failed (${problem}); ${moved ? `failing over to ${this.server}` : 'retrying'}`);
      // Try every server once before backing off, so a dead first server costs one round trip.
      if (this.servers.length === 1 || failures % this.servers.length === 0) {
        const round = Math.ceil(failures / this.servers.length);
        const backoff = backoffDelay(round, this.random(), this.backoff);
        await this.clock.sleep(retryAfterMs === undefined ? backoff : retryAfterDelay(retryAfterMs, backoff, this.random()), opts.signal);
      }
    }
  }
}

/** The verdict of an error body: `{"error": {"code", "message"}}`, or the bare string of servers before it. */
function errorText(body: any, fallback: string): string {
  const e = body?.error;
  if (typeof e === 'string') return e;
  if (e && typeof e.message === 'string') return e.message;
  return fallback;
}

function describeTransportError(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timed out';
  if (e?.name === 'AbortError') return 'aborted';
  const code = e?.cause?.code;
  if (code) return code;
  return e?.cause?.message ?? e?.message ?? String(err);
}

/** The answer's result for each item, by step id; an item the answer left out is reported as such. */
function matchResults(items: LeaseRef[], answered: unknown): ItemResult[] {
  const results = Array.isArray(answered) ? (answered as ItemResult[]) : [];
  const byStep = new Map(results.map((x) => [String(x.step_id), x]));
  return items.map((i) => byStep.get(String(i.step_id)) ?? { step_id: i.step_id, ok: false, status: 500, error: 'no result for this item in the answer' });
}
