import { attemptPhaseSpanId, attemptSpanId, launchSpanId, launchTraceId, runSpanId, runTraceId, traceSampled, type RunTrace, type Sampler } from './trace-ids.js';

/**
 * The spans of a run, as plain data built from the store's timestamps: the exporter turns them
 * into the SDK's spans. Names and attributes follow OpenTelemetry's CI/CD conventions
 * (`cicd.pipeline.*`, `cicd.pipeline.task.*`); what they do not cover is under `opschain.*`.
 */
export interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  /** The parent is the caller's span (from a traceparent), not one of ours. */
  parentRemote?: boolean;
  name: string;
  kind: 'internal' | 'server' | 'producer';
  start: Date;
  end: Date;
  attributes: Record<string, string | number | boolean | string[]>;
  /** Set: the span ended in error, with this message. Unset (or undefined): ok. */
  error?: string | undefined;
  /** Spans of other traces this one follows from (a run links to the trigger launch that started it). */
  links?: SpanLink[];
}

export interface SpanLink {
  traceId: string;
  spanId: string;
  attributes: Record<string, string | number | boolean>;
}

/** The launch of a run by a trigger, as the tick ledger recorded it (and its webhook delivery, if one). */
export interface LaunchFacts {
  tickId: number;
  kind: 'schedule' | 'once' | 'webhook';
  triggerId: number;
  /** When the launch was due (a schedule's tick, a one-shot's time) or, for a webhook, when its delivery was received. */
  dueAt: Date;
  firedAt: Date;
  deliveryId: number | null;
  deliveryKey: string | null;
}

/** What a run row holds for its spans. */
export interface RunTraceFacts extends RunTrace {
  name: string;
  project: string;
  round: number;
}

export interface FinishedRunFacts extends RunTraceFacts {
  status: 'succeeded' | 'failed' | 'error' | 'cancelled';
  cause: string | null;
  createdAt: Date;
  /** When `runs retry` last reopened the run (the start of its current round). */
  roundAt: Date | null;
  finishedAt: Date;
  /** The trigger that launched the run, when one did. */
  triggerId: number | null;
  templateName: string | null;
  /** The trigger launch that created the run, while the tick ledger still holds it. */
  launch?: LaunchFacts | null;
}

/** The lease an attempt held, as the store had it when the attempt ended. */
export interface LeaseFacts {
  /** When the entry became ready: its wait in the queue began. */
  readyAt: Date | null;
  claimedAt: Date;
  deliveredAt: Date | null;
  ackedAt: Date | null;
  renewedAt: Date | null;
  token: string;
  lane: number | null;
  renewals: number;
  /** The replica that claimed and delivered it. */
  holder: string;
  /** Milliseconds the entry was set aside out of the claim path, per verdict; null when never. */
  waited?: Record<string, number> | null;
}

export interface AttemptFacts {
  run: RunTraceFacts;
  stepId: number;
  step: string;
  attempt: number;
  /** How it ended: a step status, or `requeued` when it went back to the queue as a new attempt. */
  outcome: 'succeeded' | 'failed' | 'system_error' | 'cancelled' | 'requeued';
  exitCode: number | null;
  cause: string | null;
  /** `runner_lost`, `pinned_runner_lost`, or null. */
  event: string | null;
  runnerId: string | null;
  runnerName: string | null;
  runnerGroup: string | null;
  logBytes: number | null;
  startedAt: Date | null;
  finishedAt: Date;
  lease: LeaseFacts | null;
}

const LANES = ['system', 'interactive', 'bulk'];

/** cicd.pipeline.task.run.result of an attempt. */
export function attemptResult(a: Pick<AttemptFacts, 'outcome' | 'cause'>): string {
  if (a.outcome === 'succeeded') return 'success';
  if (a.outcome === 'cancelled') return 'cancellation';
  if (a.cause && /^timed out/.test(a.cause)) return 'timeout';
  if (a.cause && /cancel/i.test(a.cause)) return 'cancellation';
  return a.outcome === 'failed' ? 'failure' : 'error';
}

const RUN_RESULT: Record<FinishedRunFacts['status'], string> = { succeeded: 'success', failed: 'failure', error: 'error', cancelled: 'cancellation' };

const clampEnd = (start: Date, end: Date): Date => (end.getTime() < start.getTime() ? start : end);

/**
 * The run span of the round that just finished. Round 0 is the child of the caller's span (when
 * a traceparent was given); a later round, opened by `runs retry`, the child of round 0.
 */
export function runSpan(run: FinishedRunFacts): SpanRecord {
  const traceId = runTraceId(run);
  const start = run.round > 0 && run.roundAt ? run.roundAt : run.createdAt;
  const parent: Pick<SpanRecord, 'parentSpanId' | 'parentRemote'> =
    run.round > 0 ? { parentSpanId: runSpanId(traceId, run.id, 0) } : run.parentSpanId ? { parentSpanId: run.parentSpanId, parentRemote: true } : {};
  return {
    traceId,
    spanId: runSpanId(traceId, run.id, run.round),
    ...parent,
    name: `RUN ${run.name}`,
    kind: 'server',
    start,
    end: clampEnd(start, run.finishedAt),
    attributes: {
      'cicd.pipeline.name': run.name,
      'cicd.pipeline.run.id': String(run.id),
      'cicd.pipeline.action.name': 'RUN',
      'cicd.pipeline.result': RUN_RESULT[run.status],
      'opschain.run.status': run.status,
      'opschain.project': run.project,
      'opschain.run.round': run.round,
      ...(run.cause ? { 'opschain.run.cause': run.cause } : {}),
      ...(run.templateName ? { 'opschain.template.name': run.templateName } : {}),
      ...(run.triggerId !== null ? { 'opschain.trigger.id': String(run.triggerId) } : {}),
    },
    // A cancelled run did not do what it was asked: its span ends in error, the cancel its message.
    ...(run.status !== 'succeeded' ? { error: run.cause ?? run.status } : {}),
    ...(run.launch ? { links: [{ traceId: launchTraceId(run.launch.tickId), spanId: launchSpanId(run.launch.tickId), attributes: { 'opschain.link': 'launched_by' } }] } : {}),
  };
}

/**
 * The span of the trigger launch (or webhook delivery) that started a run: a trace of its own,
 * from the launch's due time (a webhook's receipt) to the run's creation, which the run span links
 * to. As OpenTelemetry's messaging conventions have a message's processing link to its creation,
 * the run, the work the launch set off, carries the link: the launch is a producer span and has
 * no children. Emitted with the run's first round, so once.
 */
export function launchSpan(launch: LaunchFacts, run: Pick<FinishedRunFacts, 'id' | 'name' | 'templateName'>): SpanRecord {
  const webhook = launch.kind === 'webhook';
  const attributes: SpanRecord['attributes'] = {
    'opschain.trigger.id': String(launch.triggerId),
    'opschain.trigger.kind': launch.kind,
    'opschain.trigger.tick.id': String(launch.tickId),
    'opschain.run.id': String(run.id),
    'cicd.pipeline.name': run.name,
  };
  if (run.templateName) attributes['opschain.template.name'] = run.templateName;
  if (launch.deliveryKey !== null) attributes['opschain.webhook.delivery.id'] = launch.deliveryKey;
  return {
    traceId: launchTraceId(launch.tickId),
    spanId: launchSpanId(launch.tickId),
    name: webhook ? 'opschain.webhook.delivery' : 'opschain.trigger.launch',
    kind: 'producer',
    start: launch.dueAt,
    end: clampEnd(launch.dueAt, launch.firedAt),
    attributes,
  };
}

/**
 * The span of one step attempt and its children: the wait in the queue (ready → delivered), the
 * lease (delivered → ended) and the execution (acked → ended, with the exit code). Built for
 * every step when traces are on, so written plainly: attributes assigned one by one, no spreads.
 */
export function attemptSpans(a: AttemptFacts): SpanRecord[] {
  const traceId = runTraceId(a.run);
  const spanId = attemptSpanId(traceId, a.stepId, a.attempt);
  const lease = a.lease;
  const delivered = lease?.deliveredAt ?? a.startedAt;
  const start = lease?.readyAt ?? lease?.claimedAt ?? delivered ?? a.finishedAt;
  const end = clampEnd(start, a.finishedAt);
  const result = attemptResult(a);
  const error = a.outcome === 'succeeded' ? undefined : (a.cause ?? (a.exitCode !== null ? `exited with code ${a.exitCode}` : a.outcome));
  const runId = String(a.run.id);
  const taskRunId = `${a.stepId}.${a.attempt}`;
  // The run and task identity is on the attempt span only: its children inherit it by parentage,
  // and four attributes fewer on three spans is a quarter less JSON to encode for every step.
  const attrs: SpanRecord['attributes'] = {
    'cicd.pipeline.name': a.run.name,
    'cicd.pipeline.run.id': runId,
    'cicd.pipeline.task.name': a.step,
    'cicd.pipeline.task.run.id': taskRunId,
  };
  attrs['cicd.pipeline.task.run.result'] = result;
  attrs['opschain.step.id'] = String(a.stepId);
  attrs['opschain.attempt'] = a.attempt;
  if (a.event) attrs['opschain.attempt.event'] = a.event;
  if (a.outcome === 'requeued') attrs['opschain.attempt.requeued'] = true;
  const out: SpanRecord[] = [{ traceId, spanId, parentSpanId: runSpanId(traceId, a.run.id, a.run.round), name: `RUN ${a.step}`, kind: 'internal', start, end, attributes: attrs, error }];
  if (!delivered) return out;

  if (lease?.readyAt) {
    const q: SpanRecord['attributes'] = {};
    if (lease.lane !== null) q['opschain.queue.lane'] = LANES[lease.lane] ?? String(lease.lane);
    q['opschain.queue.wait_ms'] = Math.max(0, delivered.getTime() - lease.readyAt.getTime());
    // Every attempt is one offer: the attempt number counts the offers of the step so far.
    q['opschain.queue.offers'] = a.attempt;
    // The verdicts it was set aside on, longest first, and for how long each; the rest of the
    // wait it was claimable, waiting for a runner's room or the next tick.
    if (lease.waited) {
      const verdicts = Object.keys(lease.waited).sort((x, y) => lease.waited![y] - lease.waited![x] || (x < y ? -1 : 1));
      q['opschain.queue.verdicts'] = verdicts;
      for (const v of verdicts) q[`opschain.queue.verdict.${v}.wait_ms`] = lease.waited[v];
    }
    out.push({ traceId, spanId: attemptPhaseSpanId(spanId, 'queue'), parentSpanId: spanId, name: 'opschain.queue', kind: 'internal', start: lease.readyAt, end: clampEnd(lease.readyAt, delivered), attributes: q });
  }

  const l: SpanRecord['attributes'] = {};
  if (a.runnerId) l['cicd.worker.id'] = a.runnerId;
  if (a.runnerName) l['cicd.worker.name'] = a.runnerName;
  if (a.runnerGroup) l['opschain.runner.group'] = a.runnerGroup;
  if (lease) {
    l['opschain.lease.token'] = lease.token;
    l['opschain.lease.replica'] = lease.holder;
    l['opschain.lease.renewals'] = lease.renewals;
    if (lease.ackedAt) l['opschain.lease.ack_wait_ms'] = Math.max(0, lease.ackedAt.getTime() - delivered.getTime());
    if (lease.renewedAt) l['opschain.lease.last_renewed_ms_before_end'] = Math.max(0, a.finishedAt.getTime() - lease.renewedAt.getTime());
  }
  out.push({ traceId, spanId: attemptPhaseSpanId(spanId, 'lease'), parentSpanId: spanId, name: 'opschain.lease', kind: 'internal', start: delivered, end: clampEnd(delivered, a.finishedAt), attributes: l, error: a.event ?? undefined });

  // An offer taken back before its runner acknowledged it executed nothing.
  if (a.outcome === 'requeued' && lease && !lease.ackedAt) return out;
  const execStart = lease?.ackedAt && lease.ackedAt.getTime() > delivered.getTime() ? lease.ackedAt : delivered;
  const x: SpanRecord['attributes'] = {};
  x['cicd.pipeline.task.run.result'] = result;
  if (a.exitCode !== null) x['process.exit.code'] = a.exitCode;
  x['opschain.execute.duration_ms'] = Math.max(0, a.finishedAt.getTime() - execStart.getTime());
  if (a.logBytes !== null) x['opschain.log.bytes'] = a.logBytes;
  if (a.cause) x['opschain.attempt.cause'] = a.cause;
  out.push({ traceId, spanId: attemptPhaseSpanId(spanId, 'execute'), parentSpanId: spanId, name: 'opschain.execute', kind: 'internal', start: execStart, end: clampEnd(execStart, a.finishedAt), attributes: x, error });
  return out;
}

/** Whether a run's spans are recorded: the sampler's decision on its trace, the same on every replica. */
export function runSampled(run: RunTrace, sampler: Sampler): boolean {
  return traceSampled(sampler, runTraceId(run), run.parentSpanId === null ? null : run.parentFlags);
}
