import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { hashSecret, newSecret } from '../core/tokens.js';
import { acquire } from '../dispatch/acquire.js';
import type { DispatchDeps } from '../dispatch/deps.js';
import { ackLeases, checkLease, completeLeases, FENCED, releaseLeases, renewLeases } from '../dispatch/lifecycle.js';
import { stepLogAppend } from '../store/logs.js';
import { auditRecord } from '../store/audit.js';
import { runnerRegister, runnerTouch } from '../store/runners.js';
import { tokenVerify } from '../store/tokens.js';
import { runnerAuth } from './runner-auth.js';

const PROTOCOL_VERSION = 1;
const name = { type: 'string', minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' };
const names = { type: 'array', items: name, maxItems: 64, uniqueItems: true };
const token = { anyOf: [{ type: 'string', pattern: '^[0-9]{1,19}$' }, { type: 'integer', minimum: 0 }] };
const stepId = { type: 'integer', minimum: 1 };
const leaseRefs = {
  type: 'object',
  required: ['leases'],
  additionalProperties: false,
  properties: {
    leases: {
      type: 'array',
      minItems: 1,
      maxItems: 256,
      items: { type: 'object', required: ['step_id', 'token'], additionalProperties: false, properties: { step_id: stepId, token, reason: { type: 'string', maxLength: 1000 } } },
    },
  },
};

interface Ref { step_id: number; token: string | number; reason?: string }
const toRefs = (items: Ref[]) => items.map((i) => ({ stepId: i.step_id, token: String(i.token), reason: i.reason }));

export interface RunnerRouteOptions {
  /** The replica's poll window: the longest an acquire parks. */
  pollWindowMs: number;
  /** True while this replica is out of the membership: polls are held and answered empty. */
  holdPolls: () => boolean;
}

/** The runner protocol of docs/runner-protocol.md. */
export function registerRunnerRoutes(app: FastifyInstance, deps: DispatchDeps, opts: RunnerRouteOptions): void {
  const auth = runnerAuth(deps.pool);
  const seen = new Map<string, number>();
  /** Liveness writes are coalesced: at most one per runner per few seconds, however often it polls. */
  const touch = (runnerId: string) => {
    const last = seen.get(runnerId) ?? 0;
    if (Date.now() - last < 5_000) return;
    seen.set(runnerId, Date.now());
    runnerTouch(deps.pool, { runnerIds: [runnerId], replicaId: deps.replicaId }).catch(() => seen.delete(runnerId));
  };

  // Every poll in flight, parked or held (drained runner, quiesced replica): a shutdown answers
  // them all empty before HTTP waits for its requests, or it would wait out a poll window.
  const polls = new Set<AbortController>();
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
    for (const ctl of polls) ctl.abort();
  });

  app.post<{ Body: any }>(
    '/api/runner/register',
    {
      schema: {
        body: {
          type: 'object',
          required: ['registration_token', 'name'],
          additionalProperties: false,
          properties: {
            registration_token: { type: 'string', minLength: 1, maxLength: 256 },
            name,
            group: name,
            labels: names,
            executors: names,
            max_load: { type: 'number', exclusiveMinimum: 0, maximum: 100000 },
            max_parallel_steps: { type: 'integer', minimum: 1, maximum: 64 },
            site: name,
            protocol_version: { type: 'integer', minimum: 1 },
          },
        },
      },
    },
    async (req, reply) => {
      const b = req.body as Record<string, any>;
      const tok = await tokenVerify(deps.pool, 'registration', b.registration_token);
      if (!tok) return reply.code(401).send({ error: 'registration token invalid' });
      const credential = newSecret('runner');
      const runner = await runnerRegister(deps.pool, {
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
      });
      await auditRecord(deps.pool, { actor: `token:${tok.id}`, action: 'runner.register', target: runner.id, source: req.ip, detail: { name: runner.name, group: runner.group } });
      return reply.code(201).send({ runner_id: runner.id, credential, lease_ttl_ms: deps.ttlMs, poll_window_ms: opts.pollWindowMs });
    },
  );

  app.register(async (scoped) => {
    scoped.addHook('preHandler', auth);

    scoped.post<{ Body: { request_id: string; max_offers?: number; wait_ms?: number; only_run_id?: number | null } }>(
      '/api/runner/acquire',
      {
        schema: {
          body: {
            type: 'object',
            required: ['request_id'],
            additionalProperties: false,
            properties: {
              request_id: { type: 'string', minLength: 1, maxLength: 128 },
              max_offers: { type: 'integer', minimum: 1, maximum: 64 },
              wait_ms: { type: 'integer', minimum: 0 },
              only_run_id: { anyOf: [{ type: 'integer', minimum: 1 }, { type: 'null' }] },
            },
          },
        },
      },
      async (req, reply) => {
        const runner = req.runner!;
        touch(runner.id);
        const ctl = new AbortController();
        const onClose = () => ctl.abort();
        req.raw.socket.once('close', onClose);
        polls.add(ctl);
        try {
          const offers = await acquire(deps, {
            runner,
            requestId: req.body.request_id,
            maxOffers: req.body.max_offers ?? 1,
            waitMs: Math.min(req.body.wait_ms ?? opts.pollWindowMs, opts.pollWindowMs),
            onlyRunId: req.body.only_run_id ?? null,
            signal: ctl.signal,
            holdEmpty: opts.holdPolls(),
          });
          // Answered by a shutdown: close the connection with the answer, or the server's close
          // would wait out the keep-alive timeout of a socket that went idle after it began.
          if (closing) reply.header('connection', 'close');
          if (offers.length === 0) return reply.code(204).send();
          return { offers };
        } finally {
          polls.delete(ctl);
          req.raw.socket.off('close', onClose);
        }
      },
    );

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/ack', { schema: { body: leaseRefs } }, async (req) => ({
      results: await ackLeases(deps, req.runner!.id, toRefs(req.body.leases)),
    }));

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/renew', { schema: { body: leaseRefs } }, async (req) => {
      touch(req.runner!.id);
      return { results: await renewLeases(deps, req.runner!.id, toRefs(req.body.leases)) };
    });

    scoped.post<{ Body: { leases: Ref[] } }>('/api/runner/release', { schema: { body: leaseRefs } }, async (req) => ({
      results: await releaseLeases(deps, req.runner!.id, toRefs(req.body.leases)),
    }));

    scoped.post<{ Body: { completions: Array<{ step_id: number; token: string | number; exit_code: number | null; cause?: string | null }> } }>(
      '/api/runner/complete',
      {
        schema: {
          body: {
            type: 'object',
            required: ['completions'],
            additionalProperties: false,
            properties: {
              completions: {
                type: 'array',
                minItems: 1,
                maxItems: 256,
                items: {
                  type: 'object',
                  required: ['step_id', 'token', 'exit_code'],
                  additionalProperties: false,
                  properties: {
                    step_id: stepId,
                    token,
                    exit_code: { anyOf: [{ type: 'integer', minimum: -255, maximum: 255 }, { type: 'null' }] },
                    cause: { anyOf: [{ type: 'string', maxLength: 2000 }, { type: 'null' }] },
                  },
                },
              },
            },
          },
        },
      },
      async (req) => ({
        results: await completeLeases(
          deps,
          req.runner!.id,
          req.body.completions.map((c) => ({ stepId: c.step_id, token: String(c.token), exitCode: c.exit_code, cause: c.cause ?? null })),
        ),
      }),
    );

    scoped.post<{ Body: { step_id: number; token: string | number; chunks: Array<{ stream: 'stdout' | 'stderr'; text: string }> } }>(
      '/api/runner/logs',
      {
        bodyLimit: 8 * 1024 * 1024,
        schema: {
          body: {
            type: 'object',
            required: ['step_id', 'token', 'chunks'],
            additionalProperties: false,
            properties: {
              step_id: stepId,
              token,
              chunks: {
                type: 'array',
                maxItems: 1000,
                items: { type: 'object', required: ['stream', 'text'], additionalProperties: false, properties: { stream: { enum: ['stdout', 'stderr'] }, text: { type: 'string' } } },
              },
            },
          },
        },
      },
      async (req, reply) => {
        const lease = await checkLease(deps, req.runner!.id, { stepId: req.body.step_id, token: String(req.body.token) });
        if (!lease) return reply.code(409).send({ error: FENCED });
        if (req.body.chunks.length > 0) await stepLogAppend(deps.pool, { stepId: lease.stepId, attempt: lease.attempt, chunks: req.body.chunks });
        return { ok: true };
      },
    );
  });
}
