import { LOAD_MAX, LOAD_MIN } from '../core/bounds.js';
import { Invalid } from '../errors.js';

/** `k=v` → [k, v]; the flag name goes into the error for a malformed pair. */
export function parsePair(flag: string, raw: string, opts: { allowEmptyValue?: boolean } = {}): [string, string] {
  const i = raw.indexOf('=');
  const key = i > 0 ? raw.slice(0, i).trim() : '';
  const value = i > 0 ? raw.slice(i + 1).trim() : '';
  if (!key || (!value && !opts.allowEmptyValue)) throw new Invalid(`--${flag} ${raw}: expected key=value`);
  return [key, value];
}

/** Repeated `k=v1,v2` flags folded into sets per key: `location=dc1 --selector location=dc2` → dc1|dc2. */
export function parseSelectors(raws: string[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const raw of raws) {
    const [key, value] = parsePair('selector', raw);
    const values = value.split(',').map((v) => v.trim());
    if (values.some((v) => v === '')) throw new Invalid(`--selector ${raw}: empty value in the set`);
    out[key] = [...new Set([...(out[key] ?? []), ...values])];
  }
  return out;
}

/** A positive number flag (weights, loads), at least 0.001 and at most `max` (default 100000): what a `real` column holds without losing it. */
export function parsePositive(flag: string, raw: string, max = LOAD_MAX): number {
  const n = Number(raw);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(raw) || !Number.isFinite(n) || n < LOAD_MIN || n > max) throw new Invalid(`--${flag} ${raw}: expected a number from ${LOAD_MIN} to ${max}`);
  return n;
}
