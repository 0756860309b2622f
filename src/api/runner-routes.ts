import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { hashSecret, newSecret, secretKind } from '../core/tokens.js';
import { turnBatcher } from '../core/turn-batch.js';
import { acquireCarrying } from '../dispatch/acquire.js';
import type { DispatchDeps } from '../dispatch/deps.js';
import type { Revocations } from '../dispatch/revocations.js';
import { emit as emitDispatch } from '../events.js';
import { ackLeases, checkLease, completeLeases, FENCED, releaseLeases, renewLeases } from '../dispatch/lifecycle.js';
import { stepLogAppend } from '../store/logs.js';
import { leasesNotHeld } from '../store/lease-revoke.js';
import { auditRecord } from '../store/audit.js';
import { RegistrationGroupRefusedError, runnerRegisterExclusive, RunnerNameTakenError, runnerTouch } from '../store/runners.js';
import { tokenVerify, type TokenRow } from '../store/tokens.js';
import { Conflict, Forbidden, Unauthorized } from '../errors.js';
import { sendError } from './errors.js';
import { runnerAuth } from './runner-auth.js';
import { BODY_LIMIT, int4, int8, load, name as schemaName, names as schemaNames, nullableText, object, text } from './schema.js';

const PROTOCOL_VERSION = 1;
/** Parked or held acquires one runner may have at once (the runner agent keeps at most 4): excess is 429. */
export const PARKED_PER_RUNNER = 8;
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
  /** True while this replica is out of the membership: polls are held and answered empty. */
  holdPolls: () => boolean;
  /** `logs.max_step_bytes`: the most output one step attempt keeps. */
  maxStepLogBytes?: number;
  /** Wakes parked watch calls when a lease of their runner is revoked. */
  revocations: Revocations;
}

/** The runner protocol of docs/runner-protocol.md. */
export function registerRunnerRoutes(app: FastifyInstance, deps: DispatchDeps, opts: RunnerRouteOptions): void {
  const auth = runnerAuth(deps.pool);
  const seen = new Map<string, number>();
  // The runners seen in one turn of the event loop are touched by one statement.
  const touchInTurn = turnBatcher(async (runnerIds: string[]) => {
    await runnerTouch(deps.pool, { runnerIds, replicaId: deps.replicaId });
    return new Map<string, never>();
  });
  /** Liveness writes are coalesced: at most one per runner per few seconds, however often it polls. */
  const touch = (runnerId: string) => {
    const last = seen.get(runnerId) ?? 0;
    if (Date.now() - last < 5_000) return;
    seen.set(runnerId, Date.now());
    touchInTurn(runnerId).catch(() => seen.delete(runnerId));
  };

  // Every poll in flight, parked or held (drained runner, quiesced replica): a shutdown answers
  // them all empty before HTTP waits for its requests, or it would wait out a poll window.
  const polls = new Set<AbortController>();
  const parkedBy = new Map<string, number>();
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const ctl of polls) ctl.abort();
  });

  const registrationTokens = new WeakMap<object, TokenRow>();
  app.post<{ Body: any }>(
    '/api/runner/register',
    {
      bodyLimit: BODY_LIMIT.small,
      // The credential travels in the body: check it before the schema, so a caller without a
      // live registration token learns nothing about the fields (401, not a field-level 400).
      preValidation: async (req, reply) => {
        const presented = (req.body as Record<string, unknown> | null)?.registration_token;
        const tok = typeof presented === 'string' && secretKind(presented) === 'registration' ? await tokenVerify(deps.pool, 'registration', presented) : undefined;
        if (!tok) return sendError(reply, new Unauthorized('registration token invalid', 'registration_token_invalid'));
        registrationTokens.set(req, tok);
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
      const tok = registrationTokens.get(req)!;
      const credential = newSecret('runner');
      let registered: Awaited<ReturnType<typeof runnerRegisterExclusive>>;
      try {
        registered = await runnerRegisterExclusive(deps.pool, {
          id: `rnr_${randomBytes(8).toString('hex')}`,
          name: b.name,
          group: b.group ?? null,
          labels: b.labels ?? [],
          executors: b.executors ?? ['shell'],
          maxLoad: b.max_load ?? 1,
          maxParallelSteps: b.max_parallel_steps ?? 1,
          site: b.site ?? null,
          protocolVersion: b.protocol_version ?? PROTOCOL_VERSION,
          credentialHash: hashSecret(credential),
          replicaId: deps.replicaId,
          registrationTokenId: tok.id,
        }, { tokenId: tok.id, groups: tok.groups });
      } catch (err) {
        if (err instanceof RunnerNameTakenError) return sendError(reply, new Conflict(err.message, 'runner_name_taken'));
        if (err instanceof RegistrationGroupRefusedError) return sendError(reply, new Forbidden(err.message, 'registration_group_refused'));
        throw err;
      }
      const { runner, retired } = registered;
      await auditRecord(deps.pool, { actor: `token:${tok.id}`, action: 'runner.register', target: runner.id, source: req.ip, detail: { name: runner.name, group: runner.group, ...(retired.length ? { retired } : {}) } });
      return reply.code(201).send({ runner_id: runner.id, credential, lease_ttl_ms: deps.ttlMs, poll_window_ms: opts.pollWindowMs });
    },
  );

  app.register(async (scoped) => {
    // The credential is checked before the body is read: anonymous callers get 401 and nothing else.
    scoped.addHook('onRequest', auth);

    scoped.post<{ Body: { request_id: string; max_offers?: number; wait_ms?: number; only_run_id?: number | null; ack_on_delivery?: boolean; fresh?: boolean; completions?: WireCompletion[] } }>(
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
        touch(runner.id);
        const parked = parkedBy.get(runner.id) ?? 0;
        if (parked >= PARKED_PER_RUNNER) {
          return reply.code(429).header('retry-after', '1').send({ error: { code: 'too_many_acquires', message: `too many acquires in flight for this runner (at most ${PARKED_PER_RUNNER}); retry` } });
        }
        parkedBy.set(runner.id, parked + 1);
        const ctl = new AbortController();
        const onClose = () => ctl.abort();
        req.raw.socket.once('close', onClose);
        polls.add(ctl);
        try {
          const holdEmpty = opts.holdPolls();
          const { offers, results } = await acquireCarrying(deps, {
            runner,
            requestId: req.body.request_id,
            maxOffers: req.body.max_offers ?? 1,
            waitMs: Math.min(req.body.wait_ms ?? opts.pollWindowMs, opts.pollWindowMs),
            onlyRunId: req.body.only_run_id == null ? null : Number(req.body.only_run_id),
            ackOnDelivery: req.body.ack_on_delivery === true,
            fresh: req.body.fresh === true,
            signal: ctl.signal,
            holdEmpty,
            completions: toCompletions(req.body.completions ?? []),
          });
          emitDispatch(deps.events, 'acquire:answered', { outcome: offers.length > 0 ? 'offer' : runner.drained || holdEmpty ? 'held' : 'empty', offers: offers.length });
          // Answered by a shutdown: close the connection with the answer, or the server's close
          // would wait out the keep-alive timeout of a socket that went idle after it began.
          if (closing) reply.header('connection', 'close');
          if (results) return { offers, results };
          if (offers.length === 0) return reply.code(204).send();
          return { offers };
        } finally {
          const left = (parkedBy.get(runner.id) ?? 1) - 1;
          if (left > 0) parkedBy.set(runner.id, left);
          else parkedBy.delete(runner.id);
          polls.delete(ctl);
          req.raw.socket.off('close', onClose);
        }
      },
    );

    // The watch: parked like an acquire, answered as soon as one of the presented leases is no
    // longer the runner's (a cancel revoked it), so the step is killed now rather than at the
    // next renewal, up to a minute later.
    scoped.post<{ Body: { leases: Ref[]; wait_ms?: number } }>(
      '/api/runner/watch',
      {
        bodyLimit: BODY_LIMIT.batch,
        schema: { body: object({ leases: leaseRefs.properties.leases, wait_ms: int4({ min: 0 }) }, ['leases']) },
      },
      async (req, reply) => {
        const runnerId = req.runner!.id;
        touch(runnerId);
        const items = toRefs(req.body.leases);
        const ctl = new AbortController();
        const onClose = () => ctl.abort();
        req.raw.socket.once('close', onClose);
        polls.add(ctl);
        const window = setTimeout(() => ctl.abort(), Math.min(req.body.wait_ms ?? opts.pollWindowMs, opts.pollWindowMs));
        try {
          for (;;) {
            // Listen before looking, so a revocation committed between the two still wakes this call.
            const woke = opts.revocations.next(runnerId, ctl.signal);
            const revoked = await leasesNotHeld(deps.pool, { runnerId, items });
            if (revoked.length > 0 || ctl.signal.aborted || closing) {
              if (closing) reply.header('connection', 'close');
              return { revoked };
            }
            await woke;
          }
        } finally {
          clearTimeout(window);
          polls.delete(ctl);
          req.raw.socket.off('close', onClose);
        }
      },
    );

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/ack', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => ({
      results: await ackLeases(deps, req.runner!.id, toRefs(req.body.leases)),
    }));

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/renew', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => {
      touch(req.runner!.id);
      return { results: await renewLeases(deps, req.runner!.id, toRefs(req.body.leases)) };
    });

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/release', { bodyLimit: BODY_LIMIT.batch, schema: { body: leaseRefs } }, async (req) => ({
      results: await releaseLeases(deps, req.runner!.id, toRefs(req.body.leases)),
    }));

    scoped.post<{ Body: { completions: WireCompletion[] } }>(
      '/api/runner/complete',
      {
        bodyLimit: BODY_LIMIT.batch,
        schema: {
          body: object(
            {
              completions: completionItems(1),
            },
            ['completions'],
          ),
        },
      },
      async (req) => ({ results: await completeLeases(deps, req.runner!.id, toCompletions(req.body.completions)) }),
    );

    scoped.post<{ Body: { step_id: number | string; token: string | number; chunks: Array<{ stream: 'stdout' | 'stderr'; text: string }> } }>(
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
        const lease = await checkLease(deps, req.runner!.id, { stepId: Number(req.body.step_id), token: String(req.body.token) });
        if (!lease) {
          emitDispatch(deps.events, 'lease:fenced', { call: 'logs', count: 1 });
          return sendError(reply, new Conflict(FENCED, 'lease_lost'));
        }
        if (req.body.chunks.length === 0) return { ok: true };
        const { truncated } = await stepLogAppend(deps.pool, { stepId: lease.stepId, attempt: lease.attempt, chunks: req.body.chunks, maxBytes: opts.maxStepLogBytes });
        // `truncated`: the step's log is full; a runner may stop sending its output.
        return truncated ? { ok: true, truncated: true } : { ok: true };
      },
    );
  });
}
