import type { Sampler } from '../core/trace-ids.js';
import { attemptSpans, runSampled, runSpan, type AttemptFacts, type FinishedRunFacts, type SpanRecord } from '../core/trace-spans.js';
import { runTraceId, runSpanId } from '../core/trace-ids.js';
import type { Logger } from '../logger.js';
import type { OrchestratorHooks, StepOutcome } from '../orchestrator/contract.js';
import { afterCommit, type PoolClient } from '../store/pool.js';
import { traceAttemptsEnded, traceRunsFinished, traceStepRequeued } from '../store/traces.js';
import type { SpanSink } from './otlp-sink.js';

/**
 * A replica's traces: off (no sink) until the tracing feature installs one. The orchestrator's
 * hooks are wrapped once at start-up (tracedHooks) and ask this object on every call, so with
 * traces off they cost one property read and build nothing.
 */
export class RunTracing {
  private on?: { sink: SpanSink; sampler: Sampler; log: Logger };

  get active(): boolean {
    return this.on !== undefined;
  }

  start(sink: SpanSink, sampler: Sampler, log: Logger): void {
    this.on = { sink, sampler, log };
  }

  async stop(): Promise<void> {
    const on = this.on;
    this.on = undefined;
    await on?.sink.shutdown();
  }

  async flush(): Promise<void> {
    await this.on?.sink.flush();
  }

  /** The attempts and runs one transaction ended: their spans go out once it has committed. */
  async ended(client: PoolClient, outcomes: StepOutcome[]): Promise<void> {
    const on = this.on;
    if (!on || outcomes.length === 0) return;
    const rows = await traceAttemptsEnded(client, outcomes);
    if (rows.length === 0) return;
    const sampled = rows.filter((r) => runSampled(r.run, on.sampler));
    if (sampled.length === 0) return;
    const outcomeOf = new Map(outcomes.map((o) => [`${o.stepId}:${o.attempt}`, o]));
    const spans: SpanRecord[] = sampled.flatMap((r) => {
      const o = outcomeOf.get(`${r.stepId}:${r.attempt}`)!;
      const facts: AttemptFacts = { ...r, outcome: o.status, event: o.event ?? null, lease: leaseFacts(o.lease) };
      return attemptSpans(facts);
    });
    const runs = await traceRunsFinished(client, [...new Set(sampled.map((r) => r.run.id))]);
    spans.push(...runs.map(runSpan));
    afterCommit(client, () => this.emit(spans, runs));
  }

  /** An attempt that went back to the queue as a new attempt (released, never acked, reclaimed). */
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
      runnerId: null,
      runnerName: null,
      runnerGroup: null,
      logBytes: null,
      startedAt: p.lease?.deliveredAt ?? null,
      finishedAt: step.now,
      lease: leaseFacts(p.lease),
    });
    afterCommit(client, () => this.emit(spans, []));
  }

  private emit(spans: SpanRecord[], runs: FinishedRunFacts[]): void {
    const on = this.on;
    if (!on) return;
    on.sink.emit(spans);
    for (const run of runs) {
      const traceId = runTraceId(run);
      on.log.debug({ run: run.id, status: run.status, trace_id: traceId, span_id: runSpanId(traceId, run.id, run.round) }, 'run trace emitted');
    }
  }
}

function leaseFacts(l: StepOutcome['lease']): AttemptFacts['lease'] {
  if (!l) return null;
  return { readyAt: l.readyAt ?? null, claimedAt: l.claimedAt, deliveredAt: l.deliveredAt, ackedAt: l.ackedAt, renewedAt: l.renewedAt, token: l.token, lane: l.lane ?? null, holder: l.holder };
}

/**
 * The orchestrator's hooks with the spans of what they end: each hook does its work, then (with
 * traces on) reads what its transaction ended and queues the spans for after the commit. A group
 * rolled back and applied again call by call emits once, from the commit that stood.
 */
export function tracedHooks(inner: OrchestratorHooks, tracing: RunTracing): OrchestratorHooks {
  return {
    ...inner,
    async stepFinished(client, outcome) {
      await inner.stepFinished(client, outcome);
      if (tracing.active) await tracing.ended(client, [outcome]);
    },
    async stepsFinished(client, outcomes) {
      await inner.stepsFinished(client, outcomes);
      if (tracing.active) await tracing.ended(client, outcomes);
    },
    async stepRequeued(client, p) {
      await inner.stepRequeued(client, p);
      if (tracing.active) await tracing.requeued(client, p);
    },
  };
}
