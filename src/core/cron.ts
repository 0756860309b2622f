import { CronExpressionParser } from 'cron-parser';

/**
 * Cron next-due for schedules, on the maintained `cron-parser` (v5). Expressions have five fields
 * (minute hour day-of-month month day-of-week) or six (seconds first), or a predefined alias such
 * as `@daily`. Times are evaluated in the schedule's IANA time zone, so `0 2 * * *` in
 * Europe/Berlin is 02:00 local time in winter and summer alike.
 */

export type Check = { ok: true } | { ok: false; reason: string };

/** True when `tz` names an IANA time zone this runtime knows (`UTC`, `Europe/Berlin`). */
export function timeZoneCheck(tz: string): Check {
  if (!tz.trim()) return { ok: false, reason: 'time zone: expected an IANA zone name like UTC or Europe/Berlin' };
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return { ok: true };
  } catch {
    return { ok: false, reason: `time zone ${JSON.stringify(tz)}: not an IANA time zone (like UTC, Europe/Berlin, America/New_York)` };
  }
}

/** Refuses what the parser refuses, and expressions that never come due, with the parser's reason. */
export function cronCheck(expr: string, tz = 'UTC'): Check {
  const zone = timeZoneCheck(tz);
  if (!zone.ok) return zone;
  const fields = expr.trim().split(/\s+/);
  if (!expr.trim()) return { ok: false, reason: 'cron expression: empty' };
  if (!expr.trim().startsWith('@') && (fields.length < 5 || fields.length > 6)) {
    return { ok: false, reason: `cron expression ${JSON.stringify(expr)}: expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got ${fields.length}` };
  }
  try {
    const it = CronExpressionParser.parse(expr, { tz, currentDate: new Date(0) });
    if (!it.hasNext()) return { ok: false, reason: `cron expression ${JSON.stringify(expr)}: never comes due` };
    it.next();
    return { ok: true };
  } catch (err) {
    return { ok: false, reason: `cron expression ${JSON.stringify(expr)}: ${(err as Error).message}` };
  }
}

/** The first due time strictly after `after`. */
export function cronNext(expr: string, tz: string, after: Date): Date {
  return CronExpressionParser.parse(expr, { tz, currentDate: after }).next().toDate();
}

/**
 * Every due time in [from, until] (from itself included when it is a due time), at most `limit`;
 * `more` says the list was cut. The launch loop uses it for ticks that came due while nobody fired.
 */
export function cronTicks(expr: string, tz: string, from: Date, until: Date, limit: number): { ticks: Date[]; more: boolean } {
  const ticks: Date[] = [];
  const it = CronExpressionParser.parse(expr, { tz, currentDate: new Date(from.getTime() - 1) });
  for (;;) {
    const next = it.next().toDate();
    if (next.getTime() > until.getTime()) return { ticks, more: false };
    if (ticks.length === limit) return { ticks, more: true };
    ticks.push(next);
  }
}
