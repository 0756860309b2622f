/**
 * The ranges of the store's column types and the rules for text that may reach it, defined once:
 * the HTTP schemas (src/api/schema.ts), the run-file parser and the CLI's arguments all check
 * against these, so a value the store would reject (22003 out of range, 22P05 NUL in text) is
 * refused at the edge with a message naming the field.
 */

/** PostgreSQL smallint. */
export const INT2 = { min: -32_768, max: 32_767 } as const;
/** PostgreSQL integer. */
export const INT4 = { min: -2_147_483_648, max: 2_147_483_647 } as const;
/**
 * The bigint ids and tokens we accept: as JSON numbers up to 2^53 - 1 (beyond that a JSON number
 * is not exact), as digit strings up to 18 digits (always below 2^63 - 1, so the cast never fails).
 */
export const INT8_SAFE_MAX = Number.MAX_SAFE_INTEGER;
export const INT8_DIGITS_PATTERN = '^(0|[1-9][0-9]{0,17})$';
/**
 * The smallest positive `load` / `max_load`: loads are compared as fractions of a runner's
 * capacity, and a `real` column cannot hold much below this without losing the value to 0.
 */
export const LOAD_MIN = 0.001;
export const LOAD_MAX = 100_000;

/**
 * Text the store can hold and a terminal can show: no NUL (PostgreSQL text and jsonb cannot hold
 * it) and no unpaired UTF-16 surrogate (not encodable as UTF-8). As an ECMAScript pattern with the
 * `u` flag, which is how Ajv compiles JSON-schema patterns.
 */
export const SAFE_TEXT_PATTERN = '^[^\\u0000\\uD800-\\uDFFF]*$';
const SAFE_TEXT = new RegExp(SAFE_TEXT_PATTERN, 'u');

/** What is wrong with a piece of text, or undefined when it is safe to store. */
export function unsafeTextReason(text: string): string | undefined {
  if (SAFE_TEXT.test(text)) return undefined;
  return text.includes('\u0000') ? 'contains a NUL character' : 'contains an unpaired surrogate (not valid Unicode)';
}

export function isSafeText(text: string): boolean {
  return SAFE_TEXT.test(text);
}

/** Keys that must never name a field: an object built from them could reach a prototype. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** True when n is an integer within [min, max] (both inclusive). */
export function inIntRange(n: unknown, range: { min: number; max: number }): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= range.min && n <= range.max;
}

/**
 * Step output made storable without losing what it said: NUL becomes U+2400 (␀, the visible
 * symbol for NUL) and an unpaired surrogate becomes U+FFFD, the replacement character that a
 * UTF-8 decoder already puts for bytes that are not UTF-8.
 */
export function storableText(text: string): string {
  if (SAFE_TEXT.test(text)) return text;
  return text.replaceAll('\u0000', '\u2400').replace(/[\uD800-\uDFFF]/gu, '\uFFFD');
}

// What a terminal obeys rather than shows: C0 controls but tab and newline, DEL, C1 controls (a
// lone U+009B is a CSI on terminals that take 8-bit controls), and the bidi overrides and
// isolates, which reorder what follows them so a name can read as something else.
// eslint-disable-next-line no-control-regex
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex
const IDENTIFIER_REFUSED = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;

/**
 * Text safe to print on a terminal: escape sequences, other control characters and bidi overrides
 * shown as text instead of being obeyed (`\x1b`, `\x7f`, `\u009b`, `\u202e`), so stored text
 * cannot repaint or retitle the operator's terminal, write its clipboard (OSC 52), hide a line
 * with `\r` or `\x1b[2K`, or reverse what an operator reads. Tab and newline are kept. Text
 * without any of these comes back unchanged, and the output has none, so applying it twice is
 * the same as once. Every human rendering (tables, text lines, the dashboard, error messages)
 * goes through this one function; `--json` keeps the stored value.
 */
export function visibleControls(text: string): string {
  return text.replace(CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x80 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

/** One line of text: newlines and every control character escaped (for reasons and causes that become log lines, and table cells). */
export function oneLine(text: string): string {
  return visibleControls(text).replace(/\n/g, '\\n').replace(/\t/g, ' ');
}

/**
 * Why a name that identifies something (a pool, group, project or token) cannot be stored, or
 * undefined. Such names are matched and typed by operators, so a character that is invisible or
 * obeyed by a terminal (C0, DEL, C1, a bidi override) has no place in one.
 */
export function identifierProblem(text: string): string | undefined {
  const m = IDENTIFIER_REFUSED.exec(text);
  return m ? `contains the control character U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}` : undefined;
}

/** The longest prefix of text whose UTF-8 encoding fits in max bytes, never splitting a character. */
export function prefixWithinBytes(text: string, max: number): string {
  let bytes = 0;
  let i = 0;
  while (i < text.length) {
    const code = text.codePointAt(i)!;
    const width = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
    if (bytes + width > max) break;
    bytes += width;
    i += code >= 0x10000 ? 2 : 1;
  }
  return text.slice(0, i);
}
