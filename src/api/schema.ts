import { INT2, INT4, INT8_DIGITS_PATTERN, INT8_SAFE_MAX, LOAD_MAX, LOAD_MIN, SAFE_TEXT_PATTERN } from '../core/bounds.js';

/**
 * JSON-schema building blocks for every route: each bounds a value to the column it lands in, so
 * no request can make the store raise a class-22 error (500) instead of the 400 it deserves.
 * Use these instead of bare `{ type: 'integer' }` / `{ type: 'string' }`; the fuzz tier
 * (test/fuzz/http.test.ts) sends every route out-of-range numbers, NUL bytes and lone surrogates.
 */

/** A PostgreSQL `integer`, narrowed further by min/max when given. */
export function int4(opts: { min?: number; max?: number } = {}) {
  return { type: 'integer', minimum: Math.max(opts.min ?? INT4.min, INT4.min), maximum: Math.min(opts.max ?? INT4.max, INT4.max) } as const;
}

/** A PostgreSQL `smallint`, narrowed further by min/max when given. */
export function int2(opts: { min?: number; max?: number } = {}) {
  return { type: 'integer', minimum: Math.max(opts.min ?? INT2.min, INT2.min), maximum: Math.min(opts.max ?? INT2.max, INT2.max) } as const;
}

/**
 * A `bigint` id or token (step ids, run ids, lease tokens): a digit string (what the server sends,
 * up to 18 digits) or a JSON number no larger than 2^53 - 1. Positive unless min is 0.
 */
export function int8(opts: { min?: 0 | 1 } = {}) {
  const min = opts.min ?? 1;
  return {
    anyOf: [
      { type: 'string', pattern: min === 0 ? INT8_DIGITS_PATTERN : '^[1-9][0-9]{0,17}$' },
      { type: 'integer', minimum: min, maximum: INT8_SAFE_MAX },
    ],
  } as const;
}

/** A positive `real` capacity (`load`, `max_load`): at least 0.001, at most 100000. */
export function load(opts: { max?: number } = {}) {
  return { type: 'number', minimum: LOAD_MIN, maximum: Math.min(opts.max ?? LOAD_MAX, LOAD_MAX) } as const;
}

/** Free text (reasons, causes, request ids): no NUL, no lone surrogate, bounded length. */
export function text(opts: { maxLength: number; minLength?: number }) {
  return { type: 'string', minLength: opts.minLength ?? 0, maxLength: opts.maxLength, pattern: SAFE_TEXT_PATTERN } as const;
}

/** The same, or null. */
export function nullableText(opts: { maxLength: number; minLength?: number }) {
  return { anyOf: [text(opts), { type: 'null' }] } as const;
}

/** A plain name (runner, group, label, site, pool): letters, digits and `._:-`, at most 128. */
export function name(opts: { maxLength?: number } = {}) {
  return { type: 'string', minLength: 1, maxLength: opts.maxLength ?? 128, pattern: '^[A-Za-z0-9][A-Za-z0-9._:-]*$' } as const;
}

/** A set of plain names. */
export function names(opts: { maxItems?: number } = {}) {
  return { type: 'array', items: name(), maxItems: opts.maxItems ?? 64, uniqueItems: true } as const;
}

/** An id in a URL path (`/api/admin/replicas/:id/...`): safe text, bounded. */
export function pathId(opts: { maxLength?: number } = {}) {
  return text({ minLength: 1, maxLength: opts.maxLength ?? 200 });
}

/** A closed object: unknown fields are errors. */
export function object(properties: Record<string, unknown>, required: string[] = []) {
  return { type: 'object', additionalProperties: false, required, properties } as const;
}

/** Query strings arrive as text and are never coerced: a positive count as a digit string. */
export function digits(opts: { maxDigits?: number } = {}) {
  return { type: 'string', pattern: `^[1-9][0-9]{0,${(opts.maxDigits ?? 5) - 1}}$` } as const;
}

/**
 * Body limits per kind of route (fastify's `bodyLimit` route option); the server-wide default is
 * `small`. A request over its route's limit is answered 413 without being read further.
 */
export const BODY_LIMIT = {
  /** Registration, levers, acquire: a few fields. */
  small: 64 * 1024,
  /** Lease batches (up to 256 refs with reasons / causes). */
  batch: 1024 * 1024,
  /** Log batches and run submissions. */
  large: 8 * 1024 * 1024,
} as const;

/** The message for a failed `pattern` that is the safe-text rule, instead of Ajv's regex dump. */
export const SAFE_TEXT_MESSAGE = 'must not contain NUL or unpaired surrogate characters';
export { SAFE_TEXT_PATTERN };
