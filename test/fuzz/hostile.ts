import fc from 'fast-check';

/**
 * Arbitraries for the fuzz tier: values that follow a route's JSON schema closely enough to get
 * past the first check, and hostile values that should be refused at the edge.
 */

/** One JSON schema fragment, as the routes declare them. */
export type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  enum?: unknown[];
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  additionalProperties?: boolean | Schema;
};

const NUL = '\u0000';
const LONE = '\ud800';

/** Strings that must never reach the store as they are. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(NUL, `a${NUL}b`, LONE, `x${LONE}`, '\udfff', '\u001b[2J\u001b]0;owned\u0007', 'line\n# forged', '', ' ', '__proto__', 'constructor', "'; DROP TABLE runs; --", '%00', '../../etc/passwd', 'ü'.repeat(3000)),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: fc.constantFrom(NUL, LONE, 'a', '\uffff'), maxLength: 20 }),
);

/** Numbers beyond every column, and the ones just past the usual bounds. */
export const hostileNumber: fc.Arbitrary<number | string> = fc.constantFrom(
  1e21,
  -1e21,
  1e300,
  -1e300,
  1e-50,
  -1e-50,
  2147483648,
  -2147483649,
  Number.MAX_SAFE_INTEGER + 2,
  Number.MAX_SAFE_INTEGER,
  2 ** 63,
  0,
  -1,
  0.5,
  32768,
  '9999999999999999999',
  '9223372036854775808',
  '-1',
  '1e21',
  '0x10',
  '1.5',
);

/** Anything at all, of a wrong type or shape. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  hostileString,
  hostileNumber,
  fc.constantFrom(null, true, false, [], {}, [null], { __proto__: null }, [[[[[[[[[[]]]]]]]]]]),
  fc.jsonValue({ maxDepth: 3 }),
);

function fromPattern(pattern: string, maxLength: number): fc.Arbitrary<string> {
  try {
    return fc.stringMatching(new RegExp(pattern, 'u')).filter((s) => s.length <= maxLength && s.length > 0);
  } catch {
    return fc.string({ minLength: 1, maxLength: Math.min(maxLength, 20) });
  }
}

/** A value that mostly satisfies the schema (so deeper checks are reached). */
export function plausible(schema: Schema | undefined, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 4) return fc.constant('x');
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.anyOf) return fc.oneof(...schema.anyOf.map((s) => plausible(s, depth + 1)));
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'integer': {
      const min = schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : -1000);
      const max = schema.maximum ?? min + 100_000;
      return fc.oneof(fc.integer({ min: Math.max(min, -1e9), max: Math.min(max, 1e9) }), fc.constantFrom(min, max));
    }
    case 'number': {
      const min = schema.minimum ?? schema.exclusiveMinimum ?? 0;
      const max = schema.maximum ?? 1e6;
      return fc.oneof(fc.double({ min, max, noNaN: true, noDefaultInfinity: true }), fc.constantFrom(max, Math.max(min, 0.001)));
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'string': {
      const maxLength = Math.min(schema.maxLength ?? 40, 60);
      if (schema.pattern) return fromPattern(schema.pattern, maxLength);
      return fc.string({ minLength: schema.minLength ?? 0, maxLength });
    }
    case 'array':
      return fc.array(plausible(schema.items, depth + 1), { maxLength: Math.min(schema.maxItems ?? 3, 3) });
    case 'object':
      return plausibleObject(schema, depth);
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function plausibleObject(schema: Schema, depth: number): fc.Arbitrary<Record<string, unknown>> {
  const props = Object.entries(schema.properties ?? {});
  if (props.length === 0) return fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), { maxKeys: 2 });
  const required = new Set(schema.required ?? []);
  return fc.record(Object.fromEntries(props.map(([k, s]) => [k, plausible(s, depth + 1)])), { requiredKeys: props.map(([k]) => k).filter((k) => required.has(k)) }) as fc.Arbitrary<Record<string, unknown>>;
}

/** One way to break a plausible body. */
export type Mutation =
  | { kind: 'none' }
  | { kind: 'replace'; pick: number; value: unknown }
  | { kind: 'drop'; pick: number }
  | { kind: 'extra'; key: string; value: unknown }
  | { kind: 'whole'; value: unknown }
  | { kind: 'raw'; text: string };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { weight: 1, arbitrary: fc.constant({ kind: 'none' as const }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('replace' as const), pick: fc.nat(), value: hostileValue }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('drop' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('extra' as const), key: fc.constantFrom('extra', '__proto__', 'constructor', 'prototype', NUL, LONE), value: hostileValue }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('whole' as const), value: hostileValue }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('raw' as const),
      text: fc.constantFrom(
        '{"__proto__":{"admin":true}}',
        '{"constructor":{"prototype":{"admin":true}}}',
        '{not json',
        `${'['.repeat(5000)}${']'.repeat(5000)}`,
        `{"a":"${'x'.repeat(2 * 1024 * 1024)}"}`,
        '"\\u0000"',
        '{"a":"\\ud800"}',
        '',
        'null',
      ),
    }),
  },
);

/** Applies a mutation to a (plausible) value; returns the body as the text to send. */
export function mutate(value: unknown, m: Mutation): string {
  const obj = value !== null && typeof value === 'object' && !Array.isArray(value) ? { ...(value as Record<string, unknown>) } : undefined;
  const keys = obj ? Object.keys(obj) : [];
  switch (m.kind) {
    case 'none':
      return JSON.stringify(value ?? {});
    case 'replace':
      if (!obj || keys.length === 0) return JSON.stringify(m.value);
      obj[keys[m.pick % keys.length]] = m.value;
      return JSON.stringify(obj);
    case 'drop':
      if (!obj || keys.length === 0) return '{}';
      delete obj[keys[m.pick % keys.length]];
      return JSON.stringify(obj);
    case 'extra': {
      const text = JSON.stringify(obj ?? {});
      const extra = `${JSON.stringify(m.key)}:${JSON.stringify(m.value) ?? 'null'}`;
      return text === '{}' ? `{${extra}}` : `${text.slice(0, -1)},${extra}}`;
    }
    case 'whole':
      return JSON.stringify(m.value) ?? 'null';
    case 'raw':
      return m.text;
  }
}

/** Percent-encodes text for a URL path or query, including lone surrogates (as the bytes of U+FFFD would not be). */
export function encodeLoose(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0)!;
    if (code >= 0xd800 && code <= 0xdfff) out += '%ED%A0%80';
    else out += encodeURIComponent(ch);
  }
  return out;
}
