import { describe, expect, it } from 'vitest';
import { attemptPhaseSpanId, attemptSpanId, runSpanId } from '../../src/core/trace-ids.js';
import { attemptResult, attemptSpans, runSpan, type AttemptFacts, type FinishedRunFacts } from '../../src/core/trace-spans.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER = '00f067aa0ba902b7';
const at = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
const run = { id: 9, name: 'deploy', project: 'acme', traceId: TRACE, parentSpanId: CALLER, parentFlags: 1, round: 0 };

const attempt = (over: Partial<AttemptFacts> = {}): AttemptFacts => ({
  run,
  stepId: 31,
  step: 'build',
  attempt: 1,
  outcome: 'succeeded',
  exitCode: 0,
  cause: null,
  event: null,
  runnerId: 'rnr_1',
  runnerName: 'build-01',
  runnerGroup: 'linux',
  logBytes: 120,
  startedAt: at(2),
  finishedAt: at(10),
  lease: { readyAt: at(0), claimedAt: at(2), deliveredAt: at(2), ackedAt: at(3), renewedAt: null, token: '77', lane: 2, renewals: 0, holder: 'replica-a' },
  ...over,
});

describe('the spans of an attempt', () => {
  it('an attempt and its queue, lease and execution, from the store times, under the run span', () => {
    const [a, queue, lease, exec] = attemptSpans(attempt());
    const id = attemptSpanId(TRACE, 31, 1);
    expect(a).toMatchObject({ traceId: TRACE, spanId: id, parentSpanId: runSpanId(TRACE, 9, 0), name: 'RUN build', start: at(0), end: at(10) });
    expect(a.error).toBeUndefined();
    expect(a.attributes).toMatchObject({ 'cicd.pipeline.task.name': 'build', 'cicd.pipeline.task.run.result': 'success', 'opschain.attempt': 1 });
    expect(queue).toMatchObject({ spanId: attemptPhaseSpanId(id, 'queue'), parentSpanId: id, start: at(0), end: at(2) });
    expect(queue.attributes).toMatchObject({ 'opschain.queue.lane': 'bulk', 'opschain.queue.wait_ms': 2000 });
    expect(lease).toMatchObject({ spanId: attemptPhaseSpanId(id, 'lease'), start: at(2), end: at(10) });
    expect(lease.attributes).toMatchObject({ 'cicd.worker.id': 'rnr_1', 'cicd.worker.name': 'build-01', 'opschain.runner.group': 'linux', 'opschain.lease.token': '77', 'opschain.lease.replica': 'replica-a', 'opschain.lease.renewals': 0 });
    expect(exec).toMatchObject({ spanId: attemptPhaseSpanId(id, 'execute'), start: at(3), end: at(10) });
    expect(exec.attributes).toMatchObject({ 'process.exit.code': 0, 'opschain.execute.duration_ms': 7000, 'opschain.log.bytes': 120 });
  });

  it('a lost runner, a timeout and a failure are errors with their cause', () => {
    const lost = attemptSpans(attempt({ outcome: 'system_error', exitCode: null, cause: 'runner lost: lease expired without a result', event: 'runner_lost' }));
    expect(lost[0].error).toBe('runner lost: lease expired without a result');
    expect(lost[0].attributes['cicd.pipeline.task.run.result']).toBe('error');
    expect(lost[2].error).toBe('runner_lost');
    expect(attemptResult({ outcome: 'failed', cause: 'timed out after 10m' })).toBe('timeout');
    expect(attemptResult({ outcome: 'failed', cause: 'cancelled by the runner' })).toBe('cancellation');
    const failed = attemptSpans(attempt({ outcome: 'failed', exitCode: 3, cause: 'exited with code 3' }));
    expect(failed[0]).toMatchObject({ error: 'exited with code 3', attributes: { 'cicd.pipeline.task.run.result': 'failure' } });
  });

  it('an attempt with no lease read (requeued after a reclaim) is one span over its known times', () => {
    const spans = attemptSpans(attempt({ outcome: 'requeued', lease: null, startedAt: null, exitCode: null, cause: 'offer not acknowledged by its deadline' }));
    expect(spans).toHaveLength(1);
    expect(spans[0]).toMatchObject({ start: at(10), end: at(10), error: 'offer not acknowledged by its deadline', attributes: { 'opschain.attempt.requeued': true } });
  });

  it('a clock step backwards never makes a span end before it starts', () => {
    for (const s of attemptSpans(attempt({ finishedAt: at(1) }))) expect(s.end.getTime()).toBeGreaterThanOrEqual(s.start.getTime());
  });
});

describe('the run span', () => {
  const finished: FinishedRunFacts = { ...run, status: 'failed', cause: 'step build failed', createdAt: at(0), roundAt: null, finishedAt: at(20), triggerId: 4, templateName: 'deploy' };
  it("round 0 is the caller's child; a retried round the child of round 0", () => {
    expect(runSpan(finished)).toMatchObject({ spanId: runSpanId(TRACE, 9, 0), parentSpanId: CALLER, parentRemote: true, start: at(0), end: at(20), error: 'step build failed' });
    expect(runSpan(finished).attributes).toMatchObject({ 'cicd.pipeline.name': 'deploy', 'cicd.pipeline.run.id': '9', 'cicd.pipeline.result': 'failure', 'opschain.trigger.id': '4', 'opschain.template.name': 'deploy' });
    const again = runSpan({ ...finished, round: 1, roundAt: at(30), finishedAt: at(40), status: 'succeeded', cause: null });
    expect(again).toMatchObject({ spanId: runSpanId(TRACE, 9, 1), parentSpanId: runSpanId(TRACE, 9, 0), start: at(30), end: at(40) });
    expect(again.error).toBeUndefined();
  });

  it('a run with no caller is the root of its trace', () => {
    const root = runSpan({ ...finished, parentSpanId: null, parentFlags: null });
    expect(root.parentSpanId).toBeUndefined();
  });
});
