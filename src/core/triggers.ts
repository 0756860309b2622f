import { createHmac, timingSafeEqual } from 'node:crypto';
import { unsafeTextReason } from './bounds.js';
import { parseDuration } from './duration.js';

export const OVERLAP_POLICIES = ['skip', 'queue', 'allow'] as const;
export type OverlapPolicy = (typeof OVERLAP_POLICIES)[number];
export const CATCH_UP_POLICIES = ['none', 'last', 'all'] as const;
export type CatchUpPolicy = (typeof CATCH_UP_POLICIES)[number];

export const TEMPLATE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

/**
 * `--at` of a one-shot: an ISO 8601 time with an offset or Z (`2026-12-02T02:00:00Z`), or
 * `+DURATION` from now (`+90s`, `+2h`). A time without an offset is refused: which zone it meant
 * is a guess.
 */
export function oneShotTime(text: string, now: Date): { ok: true; at: Date } | { ok: false; reason: string } {
  const t = text.trim();
  if (t.startsWith('+')) {
    const ms = parseDuration(t.slice(1));
    if (ms === undefined) return { ok: false, reason: `--at ${JSON.stringify(text)}: expected +DURATION like +90s, +15m or +2h` };
    return { ok: true, at: new Date(now.getTime() + ms) };
  }
  if (t === 'now') return { ok: true, at: now };
  if (!/^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/i.test(t)) {
    return { ok: false, reason: `--at ${JSON.stringify(text)}: expected an ISO time with a zone (2026-12-02T02:00:00Z, 2026-12-02T03:00+01:00), now, or +DURATION` };
  }
  const [y, mo, d, h, mi, se] = t.split(/[^0-9]/).map(Number);
  const day = new Date(Date.UTC(y, mo - 1, d));
  const real = day.getUTCFullYear() === y && day.getUTCMonth() === mo - 1 && day.getUTCDate() === d && h < 24 && mi < 60 && (se ?? 0) < 60;
  const at = new Date(t.replace(' ', 'T'));
  if (!real || Number.isNaN(at.getTime())) return { ok: false, reason: `--at ${JSON.stringify(text)}: not a real date and time` };
  return { ok: true, at };
}

/** One `--map KEY=$.path`: the run file key set from a value of the webhook's JSON payload. */
export interface PayloadMap { key: string; path: string }

const PATH_STEP = /^(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\[['"]([^'"]*)['"]\])/;

/** Splits `$.a.b[0]['c d']` into its steps; undefined when it is not that JSONPath subset. */
export function payloadPathSteps(path: string): Array<string | number> | undefined {
  if (!path.startsWith('$')) return undefined;
  const steps: Array<string | number> = [];
  let rest = path.slice(1);
  while (rest.length) {
    const m = PATH_STEP.exec(rest);
    if (!m) return undefined;
    steps.push(m[1] ?? (m[2] !== undefined ? Number(m[2]) : m[3]));
    rest = rest.slice(m[0].length);
  }
  return steps;
}

export function payloadMapParse(text: string): { ok: true; map: PayloadMap } | { ok: false; reason: string } {
  const eq = text.indexOf('=');
  const key = eq > 0 ? text.slice(0, eq).trim() : '';
  const path = eq > 0 ? text.slice(eq + 1).trim() : '';
  if (!key || !/^[A-Za-z0-9_.-]+$/.test(key)) return { ok: false, reason: `--map ${text}: expected KEY=$.path, like env.GIT_REF=$.ref` };
  if (!payloadPathSteps(path)) return { ok: false, reason: `--map ${text}: ${JSON.stringify(path)} is not a JSONPath of the form $.a.b[0]` };
  return { ok: true, map: { key, path } };
}

/** Each map with the value it finds in a parsed payload (undefined when there is none), as `--set` text. */
function payloadValues(doc: unknown, maps: PayloadMap[]): Array<{ map: PayloadMap; value: string | undefined }> {
  return maps.map((m) => {
    let node: unknown = doc;
    for (const step of payloadPathSteps(m.path) ?? []) {
      node = node !== null && typeof node === 'object' ? (node as Record<string | number, unknown>)[step] : undefined;
    }
    if (node === undefined || node === null) return { map: m, value: undefined };
    return { map: m, value: typeof node === 'string' ? node : JSON.stringify(node) };
  });
}

/**
 * A mapped value the store cannot hold, named by the payload field and its map. A JSON escape
 * (`"a\u0000b"`) passes a check of the raw body, so the value itself is checked by the text
 * rules every other input meets (core/bounds.ts).
 */
function mappedValueProblem(map: PayloadMap, value: string): string | undefined {
  const why = unsafeTextReason(value);
  return why === undefined ? undefined : `payload ${map.path} (--map ${map.key}=${map.path}): ${why}`;
}

/**
 * The `--set` overrides a delivery's payload yields through the webhook's maps. A value that is
 * missing (or a payload that is not JSON), or one the store cannot hold, is a problem named by its
 * map; strings go in as they are, other values as JSON text.
 */
export function payloadSets(payload: string, maps: PayloadMap[]): { sets: string[]; problems: string[] } {
  if (maps.length === 0) return { sets: [], problems: [] };
  let doc: unknown;
  try {
    doc = JSON.parse(payload);
  } catch {
    return { sets: [], problems: ['payload is not JSON, so --map values cannot be taken from it'] };
  }
  const sets: string[] = [];
  const problems: string[] = [];
  for (const { map: m, value } of payloadValues(doc, maps)) {
    const refused = value === undefined ? undefined : mappedValueProblem(m, value);
    if (value === undefined) problems.push(`--map ${m.key}=${m.path}: no value at ${m.path} in the payload`);
    else if (refused) problems.push(refused);
    else sets.push(`${m.key}=${value}`);
  }
  return { sets, problems };
}

/**
 * Why a webhook call must be refused before it is recorded: a mapped value breaks the text rules.
 * A missing value or a payload that is not JSON is not refused here (the tick records it as failed).
 */
export function payloadRefusal(payload: string, maps: PayloadMap[]): string | undefined {
  if (maps.length === 0) return undefined;
  let doc: unknown;
  try {
    doc = JSON.parse(payload);
  } catch {
    return undefined;
  }
  for (const { map, value } of payloadValues(doc, maps)) {
    const refused = value === undefined ? undefined : mappedValueProblem(map, value);
    if (refused) return refused;
  }
  return undefined;
}

/** Header names of a signed webhook call (docs/triggers.md). */
export const WEBHOOK_HEADERS = {
  timestamp: 'x-opschain-timestamp',
  signature: 'x-opschain-signature',
  delivery: 'x-opschain-delivery',
} as const;

/** A delivery older (or further in the future) than this is refused. */
export const WEBHOOK_WINDOW_MS = 5 * 60_000;
/** The largest payload a webhook accepts (413 beyond it). */
export const WEBHOOK_MAX_BYTES = 1024 * 1024;
export const WEBHOOK_SECRET_PREFIX = 'ocwhk_';

/** `sha256=` + hex HMAC-SHA256 of `<timestamp>.<raw body>` under the webhook's secret. */
export function webhookSignature(secret: string, timestamp: string, body: Buffer): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex')}`;
}

export type SignatureVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Checks a call's timestamp (unix seconds, within the window of `nowMs`) and signature, comparing
 * the signature in constant time. The reasons never say which part of the signature was wrong.
 */
export function webhookVerify(p: { secret: string; timestamp: string | undefined; signature: string | undefined; body: Buffer; nowMs: number }): SignatureVerdict {
  if (!p.timestamp || !/^\d{1,12}$/.test(p.timestamp)) return { ok: false, reason: `${WEBHOOK_HEADERS.timestamp}: expected unix seconds` };
  if (!p.signature) return { ok: false, reason: `${WEBHOOK_HEADERS.signature}: required` };
  const expected = Buffer.from(webhookSignature(p.secret, p.timestamp, p.body));
  const given = Buffer.from(p.signature.trim());
  const same = given.length === expected.length && timingSafeEqual(given, expected);
  if (!same) return { ok: false, reason: 'signature does not match' };
  if (Math.abs(p.nowMs - Number(p.timestamp) * 1000) > WEBHOOK_WINDOW_MS) return { ok: false, reason: 'timestamp outside the 5-minute window' };
  return { ok: true };
}
