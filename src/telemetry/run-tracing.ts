import { runSpanId, runTraceId, type Sampler } from '../core/trace-ids.js';
import { attemptSpans, launchSpan, runSampled, runSpan, type AttemptFacts, type SpanRecord } from '../core/trace-spans.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks, StepOutcome, StepsEnded } from '../orchestrator/contract.js';
import { afterCommit, type Pool, type PoolClient } from '../store/pool.js';
import { traceAttemptsResolve, traceUnsentClaim, traceUnsentClear, traceUnsentMark, traceUnsentMarkRequeued, type UnsentSpans } from '../store/traces.js';
import type { SpanSink } from './otlp-sink.js';

/** How long the replica that ended an attempt has to send its spans before any replica may. */
export const RESEND_AFTER_MS = 60_000;

/**
 * A replica's traces: off (no sink) until the tracing feature installs one. The orchestrator's
 * hooks are wrapped once at start-up (tracedHooks) and ask this object on every call, so with
 * traces off they cost one property read, build nothing and write nothing.
 *
 * Which attempts and runs ended is known in the transaction that ended them (exactly one does:
 * the lease's deletion fences the completion, the run's last open step closes it). That
 * transaction records the spans owed (one trace_unsent row, with the facts they are built from); after it
 * commits they are built and handed to the exporter, and the row is deleted when the exporter
 * reports them sent. A row left behind (the replica died first, or the collector refused them) is
 * claimed by a replica with traces on once its grace has passed, and sent from there.
 */
export class RunTracing {
  private on?: { sink: SpanSink; sampler: Sampler; log: Logger; pool: Pool; resendAfterMs: number };
  private pool?: Pool;
  private queued: UnsentSpans[] = [];
  private emitTimer?: NodeJS.Immediate;
  /** Rows being read from the store and built: a flush waits for them. */
  private emitting = new Set<Promise<void>>();
  private sent: number[] = [];
  private clearing?: Promise<void>;

  get active(): boolean {
    return this.on !== undefined;
  }

  start(p: { sink: SpanSink; sampler: Sampler; log: Logger; pool: Pool; resendAfterMs?: number }): void {
    this.on = { ...p, resendAfterMs: p.resendAfterMs ?? RESEND_AFTER_MS };
    this.pool = p.pool;
  }

  /** Emits what is queued, exports what is buffered, forgets what was sent, and turns traces off. */
  async stop(): Promise<void> {
    await this.flush();
    const on = this.on;
    this.on = undefined;
    // A collector that refuses the last spans leaves them owed in the store, for another replica.
    await on?.sink.shutdown().catch((err) => on.log.warn({ err: (err as Error).message }, 'last spans not exported; another replica sends them'));
    while (this.clearing) await this.clearing;
  }

  /** Emits what is queued, exports what is buffered and forgets what the exporter reported sent. */
  async flush(): Promise<void> {
    this.emitQueued();
    while (this.emitting.size > 0) await Promise.all(this.emitting);
    const on = this.on;
    await on?.sink.flush().catch((err) => on.log.warn({ err: (err as Error).message }, 'spans not exported; they stay owed in the store'));
    while (this.clearing) await this.clearing;
  }

  /** The exporter sent every span of these rows: they are owed no more. */
  sentOf(ids: number[]): void {
    this.sent.push(...ids);
    this.clearing ??= this.clearSent();
  }

  private async clearSent(): Promise<void> {
    try {
      while (this.sent.length > 0 && this.pool) {
        const ids = this.sent;
        this.sent = [];
        try {
          await traceUnsentClear(this.pool, ids);
        } catch (err) {
          // Left in the store: after their grace they are sent again.
          this.on?.log.warn({ err: (err as Error).message, rows: ids.length }, 'sent spans not forgotten in the store; they will be sent again');
        }
      }
    } finally {
      this.clearing = undefined;
    }
  }

  /** In the transaction of `client`: records the spans owed for what it ended; they go out once it commits. */
  async ended(client: PoolClient, outcomes: StepOutcome[], ended: StepsEnded | void): Promise<void> {
    const on = this.on;
    if (!on || !ended || (ended.attempts.length === 0 && ended.runs.length === 0)) return;
    const outcomeOf = new Map(outcomes.map((o) => [`${o.stepId}:${o.attempt}`, o]));
    const attempts = ended.attempts.map((a) => {
      const o = outcomeOf.get(`${a.stepId}:${a.attempt}`);
      return {
        stepId: a.stepId,
        attempt: a.attempt,
        outcome: a.status as AttemptFacts['outcome'],
        exitCode: o?.exitCode ?? null,
        cause: o?.cause ?? null,
        runnerId: o?.runnerId ?? null,
        event: o?.event ?? null,
        lease: leaseFacts(o?.lease),
      };
    });
    const rows = await traceUnsentMark(client, { attempts, runIds: ended.runs, resendAfterMs: on.resendAfterMs });
    afterCommit(client, () => this.queue(rows));
  }

  /**
   * An attempt that went back to the queue as a new attempt (released, never acked, reclaimed):
   * a rare path, recorded in its transaction (the step may be delivered again right after it).
   */
  async requeued(client: PoolClient, p: Parameters<OrchestratorHooks['stepRequeued']>[1]): Promise<void> {
    const on = this.on;
    if (!on || p.fromAttempt === p.toAttempt) return;
    const row = await traceUnsentMarkRequeued(client, {
      stepId: p.stepId,
      nextAttempt: p.toAttempt,
      end: {
        attempt: p.fromAttempt,
        outcome: 'requeued',
        exitCode: null,
        cause: p.reason,
        event: null,
        runnerId: p.lease?.runnerId ?? null,
        runnerName: null,
        runnerGroup: null,
        logBytes: null,
        startedAt: p.lease?.deliveredAt ?? null,
        lease: leaseFacts(p.lease),
      },
      resendAfterMs: on.resendAfterMs,
    });
    if (row) afterCommit(client, () => this.queue([row]));
  }

  /**
   * One pass over the spans owed whose time has come: a cancel's (marked by any process, a CLI
   * on the store among them) at once, those of an attempt or run whose replica did not report
   * them sent (it died, or its collector refused them) after their grace. Each row is claimed by
   * one replica. Returns how many it claimed. Off: nothing.
   */
  async sendUnsent(p: { limit?: number; now?: Date } = {}): Promise<number> {
    const on = this.on;
    if (!on) return 0;
    const rows = await traceUnsentClaim(on.pool, { limit: p.limit ?? 100, resendAfterMs: on.resendAfterMs, now: p.now });
    if (rows.length === 0) return 0;
    await this.emit(on, rows);
    return rows.length;
  }

  /** After a commit: built and handed to the exporter off the committing call's path. */
  private queue(rows: UnsentSpans[]): void {
    if (!this.on || rows.length === 0) return;
    this.queued.push(...rows);
    this.emitTimer ??= setImmediate(() => this.emitQueued());
  }

  private emitQueued(): void {
    if (this.emitTimer) clearImmediate(this.emitTimer);
    this.emitTimer = undefined;
    const rows = this.queued;
    this.queued = [];
    if (this.on && rows.length > 0) void this.emit(this.on, rows);
  }

  /** Resolves the rows' attempts against the store, builds their spans and hands them to the exporter. */
  private emit(on: NonNullable<RunTracing['on']>, rows: UnsentSpans[]): Promise<void> {
    const done = this.build(on, rows).catch((err) => {
      // Left owed: after their grace they are read and sent again.
      on.log.warn({ err: (err as Error).message, rows: rows.length }, 'spans owed not read from the store; they will be sent after their grace');
    });
    this.emitting.add(done);
    void done.finally(() => this.emitting.delete(done));
    return done;
  }

  private async build(on: NonNullable<RunTracing['on']>, owed: UnsentSpans[]): Promise<void> {
    const rows = await traceAttemptsResolve(on.pool, owed);
    const batches: Array<{ mark: number; spans: SpanRecord[] }> = [];
    const unsampled: number[] = [];
    for (const row of rows) {
      const spans: SpanRecord[] = [];
      for (const a of row.attempts) if (runSampled(a.run, on.sampler)) spans.push(...attemptSpans(a));
      for (const run of row.runs) {
        if (!runSampled(run, on.sampler)) continue;
        spans.push(runSpan(run));
        // The launch's own trace goes out with the run's first round: once, and only for a run kept.
        if (run.launch && run.round === 0) spans.push(launchSpan(run.launch, run));
        const traceId = runTraceId(run);
        on.log.debug({ run: run.id, status: run.status, trace_id: traceId, span_id: runSpanId(traceId, run.id, run.round) }, 'run trace emitted');
      }
      if (spans.length > 0) batches.push({ mark: row.id, spans });
      else unsampled.push(row.id);
    }
    if (batches.length > 0) on.sink.emit(batches);
    if (unsampled.length > 0) this.sentOf(unsampled);
  }
}

function leaseFacts(l: StepOutcome['lease']): AttemptFacts['lease'] {
  if (!l) return null;
  return { readyAt: l.readyAt ?? null, claimedAt: l.claimedAt, deliveredAt: l.deliveredAt, ackedAt: l.ackedAt, renewedAt: l.renewedAt, token: l.token, lane: l.lane ?? null, renewals: l.renewals ?? 0, holder: l.holder, waited: l.waited ?? null };
}

/**
 * The orchestrator's hooks with the spans of what they end: each hook does its work and, with
 * traces on, records in its transaction the spans it owes, which go out once that commits.
 * A group rolled back and applied again call by call records and emits once, from the commit that stood.
 */
export function tracedHooks(inner: OrchestratorHooks, tracing: RunTracing): OrchestratorHooks {
  return {
    ...inner,
    async stepFinished(client, outcome) {
      const ended = await inner.stepFinished(client, outcome);
      if (tracing.active) await tracing.ended(client, [outcome], ended);
      return ended;
    },
    async stepsFinished(client, outcomes, opts) {
      const ended = await inner.stepsFinished(client, outcomes, opts);
      if (tracing.active) await tracing.ended(client, outcomes, ended);
      return ended;
    },
    async stepRequeued(client, p) {
      await inner.stepRequeued(client, p);
      if (tracing.active) await tracing.requeued(client, p);
    },
  };
}
