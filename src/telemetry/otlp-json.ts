import type { SpanRecord } from '../core/trace-spans.js';

/**
 * OTLP/HTTP JSON (the protocol's JSON mapping: hex ids, times as decimal strings of nanoseconds,
 * enums as numbers), from the spans as built from the store. The SDK's own path builds a
 * ReadableSpan per span, groups them by resource and scope, and converts each to an OTLP object
 * before stringifying; here the OTLP objects are built straight from the spans, once, as an export
 * is written, with nothing for fields at their defaults (zero counts, no events, no links), and
 * JSON.stringify (V8's native serialiser) writes the request in one pass.
 */

type Attributes = SpanRecord['attributes'];
type AnyValue = { stringValue: string } | { intValue: number } | { doubleValue: number } | { boolValue: boolean } | { arrayValue: { values: Array<{ stringValue: string }> } };

// OTLP's Span.SpanKind: 0 is unspecified.
const KIND: Record<SpanRecord['kind'], number> = { internal: 1, server: 2, producer: 4 };
const STATUS_OK = 1;
const STATUS_ERROR = 2;
// Span.flags: the W3C trace flags (sampled) in the low byte, with "whether the parent is remote is known" and that bit.
const FLAGS_SAMPLED = 0x01;
const FLAGS_HAS_IS_REMOTE = 0x100;
const FLAGS_IS_REMOTE = 0x200;

const nanos = (d: Date): string => {
  const ms = d.getTime();
  return ms > 0 ? `${ms}000000` : '0';
};

function anyValue(v: string | number | boolean | string[]): AnyValue {
  switch (typeof v) {
    case 'string':
      return { stringValue: v };
    case 'number':
      return Number.isInteger(v) ? { intValue: v } : Number.isFinite(v) ? { doubleValue: v } : { stringValue: String(v) };
    case 'boolean':
      return { boolValue: v };
    default:
      return { arrayValue: { values: v.map((x) => ({ stringValue: x })) } };
  }
}

export function otlpAttributes(attributes: Attributes): Array<{ key: string; value: AnyValue }> {
  const out: Array<{ key: string; value: AnyValue }> = [];
  for (const key in attributes) {
    const v = attributes[key];
    if (v !== undefined) out.push({ key, value: anyValue(v) });
  }
  return out;
}

/** One span as an OTLP `Span` object. */
export function otlpSpan(s: SpanRecord): object {
  return {
    traceId: s.traceId,
    spanId: s.spanId,
    parentSpanId: s.parentSpanId,
    name: s.name,
    kind: KIND[s.kind],
    startTimeUnixNano: nanos(s.start),
    endTimeUnixNano: nanos(s.end),
    attributes: otlpAttributes(s.attributes),
    status: s.error !== undefined ? { code: STATUS_ERROR, message: s.error } : { code: STATUS_OK },
    links: s.links?.map((l) => ({ traceId: l.traceId, spanId: l.spanId, attributes: otlpAttributes(l.attributes), flags: FLAGS_SAMPLED | FLAGS_HAS_IS_REMOTE })),
    flags: FLAGS_SAMPLED | FLAGS_HAS_IS_REMOTE | (s.parentRemote ? FLAGS_IS_REMOTE : 0),
  };
}

/** The text of an ExportTraceServiceRequest: one resource, one scope, these spans. */
export function otlpRequest(resource: Attributes, scope: { name: string; version: string }, spans: readonly SpanRecord[]): string {
  return JSON.stringify({ resourceSpans: [{ resource: { attributes: otlpAttributes(resource) }, scopeSpans: [{ scope, spans: spans.map(otlpSpan) }] }] });
}
