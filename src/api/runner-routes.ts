import type { FastifyInstance } from 'fastify';
import type { Clock } from '../clock.js';
import type { ReplicaPart } from '../context.js';
import { jitteredPollMs } from '../core/poll-jitter.js';
import { acquireCarrying } from '../dispatch/acquire.js';
import type { DispatchDeps } from '../dispatch/deps.js';
import { emit as emitDispatch } from '../events.js';
import { ackLeases, checkLease, completeLeases, FENCED, releaseLeases, renewLeases } from '../dispatch/lifecycle.js';
import { RegistrationService } from '../dispatch/registration.js';
import type { Revocations } from '../dispatch/revocations.js';
import { Conflict, Unauthorized } from '../errors.js';
import { leasesNotHeld } from '../store/lease-revoke.js';
import { stepLogAppend } from '../store/logs.js';
import type { TokenRow } from '../store/tokens.js';
import { sendError } from './errors.js';
import { LivenessBatch } from './liveness-batch.js';
import { RegistrationGate, REGISTRATION_RETRY_AFTER_S } from './registration-gate.js';
import { ParkedCalls, PARKED_PER_RUNNER, type ParkedCall } from './parked-calls.js';
import { runnerAuth } from './runner-auth.js';
import type { RunnerCredentials } from './runner-credentials.js';
import { BODY_LIMIT, int4, int8, load, name as schemaName, names as schemaNames, nullableText, object, text } from './schema.js';

export { PARKED_PER_RUNNER };
/** The longest single log chunk and the most chunks in one batch. */
export const LOG_CHUNK_MAX_CHARS = 1024 * 1024;
const name = schemaName();
const names = schemaNames();
const token = int8();
const stepId = int8();
const leaseRefs = object(
  {
    leases: {
      type: 'array',
      minItems: 1,
      maxItems: 256,
      items: object({ step_id: stepId, token, reason: text({ maxLength: 1000 }) }, ['step_id', 'token']),
    },
  },
  ['leases'],
);

/** Completions, on `complete` (at least one) and carried by `acquire` (complete-and-acquire). */
const completionItems = (minItems: number) => ({
  type: 'array',
  minItems,
  maxItems: 256,
  items: object(
    { step_id: stepId, token, exit_code: { anyOf: [int4({ min: -255, max: 255 }), { type: 'null' }] }, cause: nullableText({ maxLength: 2000 }) },
    ['step_id', 'token', 'exit_code'],
  ),
});

interface WireCompletion { step_id: number | string; token: string | number; exit_code: number | null; cause?: string | null }
const toCompletions = (items: WireCompletion[]) => items.map((c) => ({ stepId: Number(c.step_id), token: String(c.token), exitCode: c.exit_code, cause: c.cause ?? null }));

interface Ref { step_id: number | string; token: string | number; reason?: string }
const toRefs = (items: Ref[]) => items.map((i) => ({ stepId: Number(i.step_id), token: String(i.token), reason: i.reason }));

export interface RunnerRouteOptions {
  /** The replica's poll window: the longest an acquire parks. */
  pollWindowMs: number;
  /** True while this replica is out of the membership: polls idle for their window and are answered empty (outcome `held`). */
  idlePolls: () => boolean;
  /** `logs.max_step_bytes`: the most output one step attempt keeps. */
  maxStepLogBytes?: number;
  /** Wakes parked watch calls when a lease of their runner is revoked. */
  revocations: Revocations;
  /** The clock of the liveness throttle and of its batched writes. */
  clock: Clock;
  /** The replica's credential cache; without it every call reads its credential from the store. */
  credentials?: RunnerCredentials;
  /** The registrations this replica serves at once (a test may hold permits). */
  registrationGate?: RegistrationGate;
  /** The jitter of long-poll windows, in [0, 1); Math.random unless a test fixes it. */
  random?: () => number;
}

/** What every runner route is served by. */
interface RunnerRoutes {
  dispatch: DispatchDeps;
  registration: RegistrationService;
  parked: ParkedCalls;
  opts: RunnerRouteOptions;
}

type App = FastifyInstance;

/** The runner protocol of docs/runner-protocol.md; returns the part of its batched liveness writes. */
export function registerRunnerRoutes(app: App, dispatch: DispatchDeps, opts: RunnerRouteOptions): ReplicaPart {
  // The runners seen on this replica are written together, once a second, by one statement.
  const liveness = new LivenessBatch({ pool: dispatch.pool, replicaId: dispatch.replicaId, clock: opts.clock, log: dispatch.log });
  liveness.start();
  const r: RunnerRoutes = {
    dispatch,
    registration: new RegistrationService(dispatch),
    parked: new ParkedCalls({ clock: opts.clock, touch: (runnerId) => liveness.touch(runnerId) }),
    opts,
  };
  // A shutdown answers every poll in flight empty before HTTP waits for its requests.
  app.addHook('preClose', async () => r.parked.close());
  registerRoute(app, r);
  app.register(async (scoped) => {
    // The credential is checked before the body is read: anonymous callers get 401 and nothing else.
    scoped.addHook('onRequest', runnerAuth(dispatch.pool, opts.credentials));
    acquireRoute(scoped, r);
    watchRoute(scoped, r);
    ackRoute(scoped, r);
    renewRoute(scoped, r);
    releaseRoute(scoped, r);
    completeRoute(scoped, r);
    logsRoute(scoped, r);
  });
  // Stopped after HTTP closed and before the pool does: the sightings not yet written are written.
  return { halt: () => liveness.halt(), stop: () => liveness.stop() };
}

/** A poll's socket closing aborts it; returns the undo. */
function abortOnClose(socket: { once(e: 'close', f: () => void): unknown; off(e: 'close', f: () => void): unknown }, call: ParkedCall): () => void {
  const onClose = () => call.abort();
  socket.once('close', onClose);
  return () => socket.off('close', onClose);
}

function registerRoute(app: App, { registration, dispatch, opts }: RunnerRoutes): void {
  const tokens = new WeakMap<object, TokenRow>();
  const gate = opts.registrationGate ?? new RegistrationGate();
  app.post<{ Body: any }>(
    '/api/runner/register',
    {
      bodyLimit: BODY_LIMIT.small,
      // Too many registrations in flight: 429 at once, before any store work (RegistrationGate).
      onRequest: async (req, reply) => {
        const gone = new AbortController();
        reply.raw.once('close', () => gone.abort());
        const refuse = () =>
          reply
            .code(429)
            .header('retry-after', String(REGISTRATION_RETRY_AFTER_S))
            .send({ error: { code: 'too_many_registrations', message: `too many registrations in flight on this server (${gate.permits} served, ${gate.maxWaiting} waiting); retry after ${REGISTRATION_RETRY_AFTER_S} s` } });
        const entered = gate.enter(gone.signal);
        if (!entered) return refuse();
        const release = await entered;
        // The caller went away while it waited: nobody reads the answer.
        if (!release) return refuse();
        // Released when the answer is sent or the caller goes away, whichever comes first.
        if (gone.signal.aborted) release();
        else reply.raw.once('close', release);
      },
      // The credential travels in the body: check it before the schema, so a caller without a
      // live registration token learns nothing about the fields (401, not a field-level 400).
      preValidation: async (req, reply) => {
        const tok = await registration.token((req.body as Record<string, unknown> | null)?.registration_token);
        if (!tok) return sendError(reply, new Unauthorized('registration token invalid', 'registration_token_invalid'));
        tokens.set(req, tok);
      },
      schema: {
        body: object(
          {
            registration_token: text({ minLength: 1, maxLength: 256 }),
            name,
            group: name,
            labels: names,
            executors: names,
            max_load: load(),
            max_parallel_steps: int4({ min: 1, max: 64 }),
            site: name,
            protocol_version: int4({ min: 1 }),
          },
          ['registration_token', 'name'],
        ),
      },
    },
    async (req, reply) => {
      const b = req.body as Record<string, any>;
      // Taken before the write: a notice about this runner arriving meanwhile keeps it out of the cache.
      const mark = opts.credentials?.mark();
      const { runnerId, credential, runner } = await registration.register(
        tokens.get(req)!,
        { name: b.name, group: b.group, labels: b.labels, executors: b.executors, maxLoad: b.max_load, maxParallelSteps: b.max_parallel_steps, site: b.site, protocolVersion: b.protocol_version },
        req.ip,
      );
      // The runner's first call finds its credential here instead of reading the store.
      if (mark !== undefined) opts.credentials?.put(mark, [runner]);
      return reply.code(201).send({ runner_id: runnerId, credential, lease_ttl_ms: dispatch.ttlMs, poll_window_ms: opts.pollWindowMs });
    },
  );
}

function acquireRoute(app: App, { dispatch, parked, opts }: RunnerRoutes): void {
  app.post<{ Body: { request_id: string; max_offers?: number; wait_ms?: number; only_run_id?: number | null; ack_on_delivery?: boolean; fresh?: boolean; completions?: WireCompletion[] } }>(
    '/api/runner/acquire',
    {
      bodyLimit: BODY_LIMIT.small,
      schema: {
        body: object(
          {
            request_id: text({ minLength: 1, maxLength: 128 }),
            max_offers: int4({ min: 1, max: 64 }),
            wait_ms: int4({ min: 0 }),
            only_run_id: { anyOf: [int8(), { type: 'null' }] },
            ack_on_delivery: { type: 'boolean' },
            fresh: { type: 'boolean' },
            completions: completionItems(0),
          },
          ['request_id'],
        ),
      },
    },
    async (req, reply) => {
      const runner = req.runner!;
      parked.seen(runner.id);
      const call = parked.acquire(runner.id);
      if (!call) {
        return reply.code(429).header('retry-after', '1').send({ error: { code: 'too_many_acquires', message: `too many acquires in flight for this runner (at most ${PARKED_PER_RUNNER}); retry` } });
      }
      const unhook = abortOnClose(req.raw.socket, call);
      try {
        const answerIdle = opts.idlePolls();
        const { offers, results, held } = await acquireCarrying(dispatch, {
          runner,
          requestId: req.body.request_id,
          maxOffers: req.body.max_offers ?? 1,
          // Jittered, so runners that parked together are not all answered empty together.
          waitMs: jitteredPollMs(Math.min(req.body.wait_ms ?? opts.pollWindowMs, opts.pollWindowMs), opts.random ?? Math.random),
          onlyRunId: req.body.only_run_id == null ? null : Number(req.body.only_run_id),
          fresh: req.body.fresh === true,
          signal: call.signal,
          answerIdle,
          completions: toCompletions(req.body.completions ?? []),
        });
        emitDispatch(dispatch.events, 'acquire:answered', { outcome: offers.length > 0 ? 'offer' : held ? 'held' : 'empty', offers: offers.length });
        if (results) return { offers, results };
        if (offers.length === 0) return reply.code(204).send();
        return { offers };
      } finally {
        call.done();
        unhook();
      }
    },
  );
}

// The watch: parked like an acquire, answered as soon as one of the presented leases is no
// longer the runner's (a cancel revoked it), so the step is killed now rather than at the
// next renewal, up to a minute later.
function watchRoute(app: App, { dispatch, parked, opts }: RunnerRoutes): void {
  app.post<{ Body: { leases: Ref[]; wait_ms?: number } }>(
    '/api/runner/watch',
    {
      bodyLimit: BODY_LIMIT.batch,
      schema: { body: object({ leases: leaseRefs.properties.leases, wait_ms: int4({ min: 0 }) }, ['leases']) },
    },
    async (req) => {
      const runnerId = req.runner!.id;
      parked.seen(runnerId);
      const items = toRefs(req.body.leases);
      const call = parked.watch();
      const unhook = abortOnClose(req.raw.socket, call);
      const window = setTimeout(() => call.abort(), Math.min(req.body.wait_ms ?? opts.pollWindowMs, opts.pollWindowMs));
      try {
        for (;;) {
          // Listen before looking, so a revocation committed between the two still wakes this call.
          const woke = opts.revocations.next(runnerId, call.signal);
          const revoked = await leasesNotHeld(dispatch.pool, { runnerId, items });
          if (revoked.length > 0 || call.signal.aborted || parked.closing) {
            return { revoked };
          }
          await woke;
        }
      } finally {
        clearTimeout(window);
        call.done();
        unhook();
      }
    },
  );
}

function ackRoute(app: App, { dispatch }: RunnerRoutes): void {
  app.post<{ Body: { leases: Ref[] } }>('/api/runner/ack', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => ({
    results: await ackLeases(dispatch, req.runner!.id, toRefs(req.body.leases)),
  }));
}

function renewRoute(app: App, { dispatch, parked }: RunnerRoutes): void {
  app.post<{ Body: { leases: Ref[] } }>('/api/runner/renew', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => {
    parked.seen(req.runner!.id);
    return { results: await renewLeases(dispatch, req.runner!.id, toRefs(req.body.leases)) };
  });
}

function releaseRoute(app: App, { dispatch }: RunnerRoutes): void {
  app.post<{ Body: { leases: Ref[] } }>('/api/runner/release', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => ({
    results: await releaseLeases(dispatch, req.runner!.id, toRefs(req.body.leases)),
  }));
}

function completeRoute(app: App, { dispatch }: RunnerRoutes): void {
  app.post<{ Body: { completions: WireCompletion[] } }>(
    '/api/runner/complete',
    { bodyLimit: BODY_LIMIT.batch, schema: { body: object({ completions: completionItems(1) }, ['completions']) } },
    async (req) => ({ results: await completeLeases(dispatch, req.runner!.id, toCompletions(req.body.completions)) }),
  );
}

function logsRoute(app: App, { dispatch, opts }: RunnerRoutes): void {
  app.post<{ Body: { step_id: number | string; token: string | number; chunks: Array<{ stream: 'stdout' | 'stderr'; text: string }> } }>(
    '/api/runner/logs',
    {
      bodyLimit: BODY_LIMIT.large,
      schema: {
        body: object(
          {
            step_id: stepId,
            token,
            chunks: {
              type: 'array',
              maxItems: 1000,
              // Step output is arbitrary: NUL and broken UTF-16 are stored visibly replaced (storableText), not refused.
              items: object({ stream: { enum: ['stdout', 'stderr'] }, text: { type: 'string', maxLength: LOG_CHUNK_MAX_CHARS } }, ['stream', 'text']),
            },
          },
          ['step_id', 'token', 'chunks'],
        ),
      },
    },
    async (req, reply) => {
      const lease = await checkLease(dispatch, req.runner!.id, { stepId: Number(req.body.step_id), token: String(req.body.token) });
      if (!lease) {
        emitDispatch(dispatch.events, 'lease:fenced', { call: 'logs', count: 1 });
        return sendError(reply, new Conflict(FENCED, 'lease_lost'));
      }
      if (req.body.chunks.length === 0) return { ok: true };
      const { truncated } = await stepLogAppend(dispatch.pool, { stepId: lease.stepId, attempt: lease.attempt, chunks: req.body.chunks, maxBytes: opts.maxStepLogBytes });
      // `truncated`: the step's log is full; a runner may stop sending its output.
      return truncated ? { ok: true, truncated: true } : { ok: true };
    },
  );
}
