import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  attemptPhaseSpanId,
  attemptSpanId,
  formatTraceParent,
  parseTraceParent,
  runSpanId,
  runTraceId,
  spanIdOf,
  stepTraceParent,
  traceLogFields,
  traceSampled,
  TraceParentError,
} from '../../src/core/trace-ids.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const SPAN = '00f067aa0ba902b7';

describe('W3C traceparent', () => {
  it('parses and formats back', () => {
    expect(parseTraceParent(`00-${TRACE}-${SPAN}-01`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(parseTraceParent(` 00-${TRACE.toUpperCase()}-${SPAN}-00 `)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 0 });
    expect(formatTraceParent({ traceId: TRACE, spanId: SPAN, flags: 1 })).toBe(`00-${TRACE}-${SPAN}-01`);
    // A later version may carry more fields; they are ignored.
    expect(parseTraceParent(`01-${TRACE}-${SPAN}-01-extra`).traceId).toBe(TRACE);
  });

  it.each([
    ['nonsense', /not a traceparent/],
    [`00-${TRACE}-${SPAN}`, /not a traceparent/],
    [`00-${TRACE}-${SPAN}-01-more`, /version 00 has four fields/],
    [`ff-${TRACE}-${SPAN}-01`, /version ff is invalid/],
    [`00-${'0'.repeat(32)}-${SPAN}-01`, /trace id is all zeros/],
    [`00-${TRACE}-${'0'.repeat(16)}-01`, /span id is all zeros/],
    [`00-${TRACE.slice(1)}-${SPAN}-01`, /not a traceparent/],
  ])('refuses %s, naming why', (value, why) => {
    expect(() => parseTraceParent(value)).toThrow(TraceParentError);
    expect(() => parseTraceParent(value)).toThrow(why);
  });

  it('gives log fields only for a well-formed header', () => {
    expect(traceLogFields(`00-${TRACE}-${SPAN}-01`)).toEqual({ trace_id: TRACE, span_id: SPAN });
    expect(traceLogFields('bogus')).toEqual({});
    expect(traceLogFields(undefined)).toEqual({});
    expect(traceLogFields([`00-${TRACE}-${SPAN}-01`])).toEqual({});
  });
});

describe('span ids from store ids', () => {
  it('are 16 hex digits, never zero, and the same for the same key', () => {
    fc.assert(
      fc.property(fc.string(), (key) => {
        const id = spanIdOf(key);
        expect(id).toMatch(/^[0-9a-f]{16}$/);
        expect(id).not.toBe('0'.repeat(16));
        expect(spanIdOf(key)).toBe(id);
      }),
    );
  });

  it('differ across the attempts, phases and rounds of a run', () => {
    const ids = new Set<string>();
    for (let step = 1; step <= 50; step++) {
      for (let attempt = 1; attempt <= 5; attempt++) {
        const a = attemptSpanId(TRACE, step, attempt);
        ids.add(a);
        for (const phase of ['queue', 'lease', 'execute'] as const) ids.add(attemptPhaseSpanId(a, phase));
      }
    }
    for (let round = 0; round < 5; round++) ids.add(runSpanId(TRACE, 7, round));
    expect(ids.size).toBe(50 * 5 * 4 + 5);
  });

  it('a run stored before traces gets a trace id from its id alone', () => {
    expect(runTraceId({ id: 12, traceId: null })).toMatch(/^[0-9a-f]{32}$/);
    expect(runTraceId({ id: 12, traceId: null })).toBe(runTraceId({ id: 12, traceId: null }));
    expect(runTraceId({ id: 12, traceId: null })).not.toBe(runTraceId({ id: 13, traceId: null }));
    expect(runTraceId({ id: 12, traceId: TRACE })).toBe(TRACE);
  });
});

describe('sampling', () => {
  it('follows the caller under a parent-based sampler, else decides at the root', () => {
    expect(traceSampled({ name: 'parentbased_always_on', ratio: 1 }, TRACE, 0)).toBe(false);
    expect(traceSampled({ name: 'parentbased_always_on', ratio: 1 }, TRACE, 1)).toBe(true);
    expect(traceSampled({ name: 'parentbased_always_on', ratio: 1 }, TRACE, null)).toBe(true);
    expect(traceSampled({ name: 'parentbased_always_off', ratio: 1 }, TRACE, 1)).toBe(true);
    expect(traceSampled({ name: 'parentbased_always_off', ratio: 1 }, TRACE, null)).toBe(false);
    expect(traceSampled({ name: 'always_on', ratio: 1 }, TRACE, 0)).toBe(true);
    expect(traceSampled({ name: 'always_off', ratio: 1 }, TRACE, 1)).toBe(false);
  });

  it('by ratio: decided by the trace id alone, and about that share of traces kept', () => {
    const ids = Array.from({ length: 4000 }, (_, i) => spanIdOf(`a${i}`) + spanIdOf(`b${i}`));
    const kept = ids.filter((id) => traceSampled({ name: 'traceidratio', ratio: 0.25 }, id, 1)).length;
    expect(kept / ids.length).toBeGreaterThan(0.2);
    expect(kept / ids.length).toBeLessThan(0.3);
    for (const id of ids.slice(0, 100)) expect(traceSampled({ name: 'traceidratio', ratio: 0.25 }, id, null)).toBe(traceSampled({ name: 'traceidratio', ratio: 0.25 }, id, 0));
    expect(traceSampled({ name: 'traceidratio', ratio: 0 }, TRACE, null)).toBe(false);
    expect(traceSampled({ name: 'traceidratio', ratio: 1 }, TRACE, null)).toBe(true);
  });
});

describe("a step's TRACEPARENT", () => {
  const run = { id: 3, traceId: TRACE, parentSpanId: SPAN, parentFlags: 1 };
  it('names the attempt span, sampled as the run, when traces are exported', () => {
    expect(stepTraceParent(run, 40, 2, { name: 'parentbased_always_on', ratio: 1 })).toBe(`00-${TRACE}-${attemptSpanId(TRACE, 40, 2)}-01`);
    expect(stepTraceParent({ ...run, parentFlags: 0 }, 40, 2, { name: 'parentbased_always_on', ratio: 1 })).toBe(`00-${TRACE}-${attemptSpanId(TRACE, 40, 2)}-00`);
  });

  it("passes the caller's through when traces are off, and is absent with no caller", () => {
    expect(stepTraceParent(run, 40, 2, undefined)).toBe(`00-${TRACE}-${SPAN}-01`);
    expect(stepTraceParent({ ...run, parentSpanId: null, parentFlags: null }, 40, 2, undefined)).toBeUndefined();
  });
});
