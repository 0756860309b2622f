import { runSpanId, runTraceId, type Sampler } from '../core/trace-ids.js';
import { attemptSpans, launchSpan, runSampled, runSpan, type AttemptFacts, type SpanRecord } from '../core/trace-spans.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks, StepOutcome, StepsEnded } from '../orchestrator/contract.js';
import { afterCommit, type Pool, type PoolClient } from '../store/pool.js';
import { traceAttemptsRead, traceCancelledAttemptsRead, traceRunsRead, traceRunsUnsentClaim, traceStepRequeued } from '../store/traces.js';
import type { SpanSink } from './otlp-sink.js';

/** An attempt a committed transaction ended, with what only the ending call knew of it. */
interface EndedAttempt {
  stepId: number;
  attempt: number;
  status: string;
  event: string | null;
  lease: StepOutcome['lease'];
}

/**
 * A replica's traces: off (no sink) until the tracing feature installs one. The orchestrator's
 * hooks are wrapped once at start-up (tracedHooks) and ask this object on every call, so with
 * traces off they cost one property read and build nothing.
 *
 * Which attempts and runs ended is known in the transaction that ended them (exactly one does:
 * the lease's deletion fences the completion, the run's last open step closes it); the rest of
 * their spans is read after that transaction commits, off the lease writes' path, the ends of
 * several commits in one read while the previous read is under way.
 */
export class RunTracing {
  private on?: { sink: SpanSink; sampler: Sampler; log: Logger; pool: Pool };
  private pending: { attempts: EndedAttempt[]; runs: number[] } = { attempts: [], runs: [] };
  private reading?: Promise<void>;

  get active(): boolean {
    return this.on !== undefined;
  }

  start(p: { sink: SpanSink; sampler: Sampler; log: Logger; pool: Pool }): void {
    this.on = p;
  }

  /** Reads and emits what is pending, exports what is buffered, and turns traces off. */
  async stop(): Promise<void> {
    await this.flush();
    const on = this.on;
    this.on = undefined;
    await on?.sink.shutdown();
  }

  async flush(): Promise<void> {
    while (this.reading) await this.reading;
    await this.on?.sink.flush();
  }

  /** After the transaction of `client` commits, the spans of what it ended go out. */
  ended(client: PoolClient, outcomes: StepOutcome[], ended: StepsEnded | void): void {
    if (!this.on || !ended || ended.attempts.length === 0) return;
    const outcomeOf = new Map(outcomes.map((o) => [`${o.stepId}:${o.attempt}`, o]));
    const attempts = ended.attempts.map((a) => {
      const o = outcomeOf.get(`${a.stepId}:${a.attempt}`);
      return { stepId: a.stepId, attempt: a.attempt, status: a.status, event: o?.event ?? null, lease: o?.lease };
    });
    afterCommit(client, () => {
      this.pending.attempts.push(...attempts);
      this.pending.runs.push(...ended.runs);
      this.reading ??= this.readPending();
    });
  }

  private async readPending(): Promise<void> {
    try {
      while (this.on && this.pending.attempts.length > 0) {
        const { attempts, runs } = this.pending;
        this.pending = { attempts: [], runs: [] };
        try {
          await this.emitEnded(this.on, attempts, runs);
        } catch (err) {
          this.on?.log.warn({ err: (err as Error).message, attempts: attempts.length }, 'spans of ended attempts not read; they are not exported');
        }
      }
    } finally {
      this.reading = undefined;
    }
  }

  private async emitEnded(on: NonNullable<RunTracing['on']>, attempts: EndedAttempt[], runIds: number[]): Promise<void> {
    const [rows, runs] = await Promise.all([traceAttemptsRead(on.pool, attempts), traceRunsRead(on.pool, runIds)]);
    const endedOf = new Map(attempts.map((a) => [`${a.stepId}:${a.attempt}`, a]));
    const spans: SpanRecord[] = [];
    for (const r of rows) {
      if (!runSampled(r.run, on.sampler)) continue;
      const a = endedOf.get(`${r.stepId}:${r.attempt}`)!;
      spans.push(...attemptSpans({ ...r, outcome: a.status as AttemptFacts['outcome'], event: a.event, lease: leaseFacts(a.lease) }));
    }
    for (const run of runs) {
      if (!runSampled(run, on.sampler)) continue;
      spans.push(runSpan(run));
      // The launch's own trace goes out with the run's first round: once, and only for a run kept.
      if (run.launch && run.round === 0) spans.push(launchSpan(run.launch, run));
      const traceId = runTraceId(run);
      on.log.debug({ run: run.id, status: run.status, trace_id: traceId, span_id: runSpanId(traceId, run.id, run.round) }, 'run trace emitted');
    }
    if (spans.length > 0) on.sink.emit(spans);
  }

  /**
   * One pass of the cancelled runs' spans: claims runs a cancel marked (on any process; each run
   * claimed by one replica) and emits their run span and the attempts the cancel stopped. Returns
   * how many runs it claimed. Off: nothing.
   */
  async sendCancelled(limit = 100): Promise<number> {
    const on = this.on;
    if (!on) return 0;
    const runIds = await traceRunsUnsentClaim(on.pool, limit);
    if (runIds.length === 0) return 0;
    const [runs, attempts] = await Promise.all([traceRunsRead(on.pool, runIds), traceCancelledAttemptsRead(on.pool, runIds)]);
    const spans: SpanRecord[] = [];
    for (const r of attempts) {
      if (!runSampled(r.run, on.sampler)) continue;
      spans.push(...attemptSpans({ ...r, outcome: 'cancelled', event: null, lease: null }));
    }
    for (const run of runs) {
      if (!runSampled(run, on.sampler)) continue;
      spans.push(runSpan(run));
      if (run.launch && run.round === 0) spans.push(launchSpan(run.launch, run));
    }
    if (spans.length > 0) on.sink.emit(spans);
    return runIds.length;
  }

  /**
   * An attempt that went back to the queue as a new attempt (released, never acked, reclaimed):
   * a rare path, read in its transaction (the step may be delivered again right after it).
   */
  async requeued(client: PoolClient, p: Parameters<OrchestratorHooks['stepRequeued']>[1]): Promise<void> {
    const on = this.on;
    if (!on || p.fromAttempt === p.toAttempt) return;
    const step = await traceStepRequeued(client, { stepId: p.stepId, attempt: p.toAttempt });
    if (!step || !runSampled(step.run, on.sampler)) return;
    const spans = attemptSpans({
      run: step.run,
      stepId: p.stepId,
      step: step.step,
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
      finishedAt: step.now,
      lease: leaseFacts(p.lease),
    });
    afterCommit(client, () => this.on?.sink.emit(spans));
  }
}

function leaseFacts(l: StepOutcome['lease']): AttemptFacts['lease'] {
  if (!l) return null;
  return { readyAt: l.readyAt ?? null, claimedAt: l.claimedAt, deliveredAt: l.deliveredAt, ackedAt: l.ackedAt, renewedAt: l.renewedAt, token: l.token, lane: l.lane ?? null, renewals: l.renewals ?? 0, holder: l.holder, waited: l.waited ?? null };
}

/**
 * The orchestrator's hooks with the spans of what they end: each hook does its work and, with
 * traces on, hands what its transaction ended to the tracing, which emits it once that commits.
 * A group rolled back and applied again call by call emits once, from the commit that stood.
 */
export function tracedHooks(inner: OrchestratorHooks, tracing: RunTracing): OrchestratorHooks {
  return {
    ...inner,
    async stepFinished(client, outcome) {
      const ended = await inner.stepFinished(client, outcome);
      if (tracing.active) tracing.ended(client, [outcome], ended);
      return ended;
    },
    async stepsFinished(client, outcomes, opts) {
      const ended = await inner.stepsFinished(client, outcomes, opts);
      if (tracing.active) tracing.ended(client, outcomes, ended);
      return ended;
    },
    async stepRequeued(client, p) {
      await inner.stepRequeued(client, p);
      if (tracing.active) await tracing.requeued(client, p);
    },
  };
}
