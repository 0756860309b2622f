/**
 * W3C trace context and the ids of a run's spans. Every span id is derived from store ids (the
 * run's trace id, step id, attempt), so whichever replica emits a span names it as any other would:
 * a failover mid-run cannot split a trace, and a step's TRACEPARENT, handed out at delivery, names
 * the span a later completion emits.
 */

export interface TraceParent {
  traceId: string;
  spanId: string;
  /** Trace flags; bit 0 is `sampled`. */
  flags: number;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

export class TraceParentError extends Error {
  constructor(readonly value: string, reason: string) {
    super(`traceparent ${JSON.stringify(value)}: ${reason}; expected 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`);
    this.name = 'TraceParentError';
  }
}

/** Parses a W3C traceparent header value; throws TraceParentError naming what is wrong. */
export function parseTraceParent(value: string): TraceParent {
  const v = value.trim().toLowerCase();
  const m = TRACEPARENT.exec(v);
  if (!m) throw new TraceParentError(value, 'not a traceparent');
  const [, version, traceId, spanId, flags, rest] = m;
  if (version === 'ff') throw new TraceParentError(value, 'version ff is invalid');
  // Version 00 has exactly four fields; a later version may append more, which are ignored.
  if (version === '00' && rest !== undefined) throw new TraceParentError(value, 'version 00 has four fields');
  if (traceId === ZERO_TRACE) throw new TraceParentError(value, 'the trace id is all zeros');
  if (spanId === ZERO_SPAN) throw new TraceParentError(value, 'the span id is all zeros');
  return { traceId, spanId, flags: parseInt(flags, 16) };
}

export function formatTraceParent(p: TraceParent): string {
  return `00-${p.traceId}-${p.spanId}-${(p.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/**
 * A non-zero 16-hex span id from a key: two 32-bit FNV-1a hashes of it from different offset
 * bases (plain integer arithmetic: BigInt's 64-bit FNV cost more than the rest of a span). Keys
 * are ASCII (hex ids, numbers, names of ours).
 */
export function spanIdOf(key: string): string {
  let a = 0x811c9dc5;
  let b = 0x050c5d1f;
  for (let i = 0; i < key.length; i++) {
    const c = key.charCodeAt(i) & 0xff;
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x01000193);
  }
  const hex = (a >>> 0).toString(16).padStart(8, '0') + (b >>> 0).toString(16).padStart(8, '0');
  return hex === '0000000000000000' ? '0000000000000001' : hex;
}

/** The trace id of a run: the stored one, or for a run stored before traces, one from its id. */
export function runTraceId(run: { id: number; traceId: string | null }): string {
  return run.traceId ?? spanIdOf(`opschain:run:${run.id}`) + spanIdOf(`opschain:trace:${run.id}`);
}

/** The span of one round of a run (round 0 from submit; each `runs retry` opens the next). */
export function runSpanId(traceId: string, runId: number, round: number): string {
  return spanIdOf(`run:${traceId}:${runId}:${round}`);
}

/** The span of one attempt of a step: what the step's TRACEPARENT names. */
export function attemptSpanId(traceId: string, stepId: number, attempt: number): string {
  return spanIdOf(`attempt:${traceId}:${stepId}:${attempt}`);
}

/**
 * The trace of a trigger launch (one tick of the ledger; for a webhook, its delivery): a trace of
 * its own, which the run it started links to. Derived from the tick's id, as every id is from store ids.
 */
export function launchTraceId(tickId: number): string {
  return spanIdOf(`opschain:tick:${tickId}`) + spanIdOf(`opschain:launch:${tickId}`);
}

export function launchSpanId(tickId: number): string {
  return spanIdOf(`launch:${tickId}`);
}

export type AttemptPhase = 'queue' | 'lease' | 'execute';

/** The child spans of an attempt: its wait in the queue, its lease, its execution. */
export function attemptPhaseSpanId(attemptSpan: string, phase: AttemptPhase): string {
  return spanIdOf(`${phase}:${attemptSpan}`);
}

export type SamplerName = 'always_on' | 'always_off' | 'traceidratio' | 'parentbased_always_on' | 'parentbased_always_off' | 'parentbased_traceidratio';
export const SAMPLER_NAMES: readonly SamplerName[] = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'];

/** OTEL_TRACES_SAMPLER and its argument (the ratio of the traceidratio samplers). */
export interface Sampler {
  name: SamplerName;
  ratio: number;
}

/**
 * Whether a run's trace is recorded, decided from the trace id and the caller's flags alone, so
 * every replica decides alike. The ratio test is the OpenTelemetry JS SDK's (the trace id's 32-bit
 * words xor-ed), so a caller sampling by ratio with that SDK keeps the same traces.
 */
export function traceSampled(sampler: Sampler, traceId: string, parentFlags: number | null): boolean {
  const ratio = () => {
    if (sampler.ratio >= 1) return true;
    if (sampler.ratio <= 0) return false;
    let acc = 0;
    for (let i = 0; i < traceId.length / 8; i++) acc = (acc ^ parseInt(traceId.slice(i * 8, i * 8 + 8), 16)) >>> 0;
    return acc <= Math.floor(sampler.ratio * 0xffffffff);
  };
  if (sampler.name.startsWith('parentbased_') && parentFlags !== null) return (parentFlags & 1) === 1;
  switch (sampler.name) {
    case 'always_on':
    case 'parentbased_always_on':
      return true;
    case 'always_off':
    case 'parentbased_always_off':
      return false;
    default:
      return ratio();
  }
}

/** What a run row holds of its trace. */
export interface RunTrace {
  id: number;
  traceId: string | null;
  parentSpanId: string | null;
  parentFlags: number | null;
}

/**
 * The TRACEPARENT a step attempt runs under. With traces exported: the attempt's own span,
 * sampled as the run's trace is. Without: the caller's traceparent passed through unchanged, so
 * a step's tools still join the CI job's trace; nothing when there is no caller.
 */
export function stepTraceParent(run: RunTrace, stepId: number, attempt: number, sampler: Sampler | undefined): string | undefined {
  if (!sampler) {
    if (run.traceId === null || run.parentSpanId === null) return undefined;
    return formatTraceParent({ traceId: run.traceId, spanId: run.parentSpanId, flags: run.parentFlags ?? 0 });
  }
  const traceId = runTraceId(run);
  const sampled = traceSampled(sampler, traceId, run.parentSpanId === null ? null : run.parentFlags);
  return formatTraceParent({ traceId, spanId: attemptSpanId(traceId, stepId, attempt), flags: sampled ? 1 : 0 });
}

/** The log fields of a request that carried a traceparent header; none when it has none or a bad one. */
export function traceLogFields(header: string | string[] | undefined): { trace_id: string; span_id: string } | Record<string, never> {
  if (typeof header !== 'string') return {};
  try {
    const p = parseTraceParent(header);
    return { trace_id: p.traceId, span_id: p.spanId };
  } catch {
    return {};
  }
}
