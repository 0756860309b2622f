import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cronCheck, cronNext, cronTicks, timeZoneCheck } from '../../src/core/cron.js';
import { oneShotTime, payloadMapParse, payloadSets, webhookSignature, webhookVerify } from '../../src/core/triggers.js';

describe('cron next-due', () => {
  it('reads the expression in the schedule time zone, across a DST change', () => {
    // 02:00 Berlin: 01:00Z in winter, 00:00Z in summer; on 2026-03-29 02:00 does not exist and the tick moves to 03:00 CEST.
    expect(cronNext('0 2 * * *', 'Europe/Berlin', new Date('2026-03-27T12:00:00Z')).toISOString()).toBe('2026-03-28T01:00:00.000Z');
    expect(cronNext('0 2 * * *', 'Europe/Berlin', new Date('2026-03-30T12:00:00Z')).toISOString()).toBe('2026-03-31T00:00:00.000Z');
    expect(cronNext('0 2 * * *', 'UTC', new Date('2026-03-30T02:00:00Z')).toISOString()).toBe('2026-03-31T02:00:00.000Z');
  });

  it('next is strictly after and is a tick; ticks lists every tick in the window, both ends included', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1_700_000_000_000, max: 1_900_000_000_000 }), fc.constantFrom('*/5 * * * *', '0 * * * *', '30 2 * * 1-5', '*/10 * * * * *'), (t, expr) => {
        const after = new Date(t);
        const next = cronNext(expr, 'UTC', after);
        expect(next.getTime()).toBeGreaterThan(t);
        const { ticks, more } = cronTicks(expr, 'UTC', next, next, 10);
        expect(ticks.map((d) => d.getTime())).toEqual([next.getTime()]);
        expect(more).toBe(false);
        const second = cronNext(expr, 'UTC', next);
        // The window includes its start: from just after `after`, it holds exactly the next two ticks.
        expect(cronTicks(expr, 'UTC', new Date(t + 1), second, 10).ticks.map((d) => d.getTime())).toEqual([next.getTime(), second.getTime()]);
      }),
      { numRuns: 200 },
    );
    expect(cronTicks('* * * * *', 'UTC', new Date('2026-01-01T00:00:00Z'), new Date('2026-01-01T01:00:00Z'), 10)).toMatchObject({ more: true });
  });

  it('refuses bad expressions and zones with the reason', () => {
    expect(cronCheck('0 2 * * *', 'Europe/Berlin')).toEqual({ ok: true });
    expect(cronCheck('@daily')).toEqual({ ok: true });
    expect(cronCheck('61 * * * *')).toEqual({ ok: false, reason: 'cron expression "61 * * * *": Constraint error, got value 61 expected range 0-59' });
    expect(cronCheck('* * *')).toEqual({ ok: false, reason: 'cron expression "* * *": expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got 3' });
    expect(cronCheck('0 0 30 2 *')).toMatchObject({ ok: false });
    expect(cronCheck('0 2 * * *', 'Mars/Olympus')).toEqual({ ok: false, reason: 'time zone "Mars/Olympus": not an IANA time zone (like UTC, Europe/Berlin, America/New_York)' });
    expect(timeZoneCheck('America/New_York')).toEqual({ ok: true });
  });
});

describe('one-shot times, payload maps and signatures', () => {
  const now = new Date('2026-12-01T10:00:00Z');
  it('reads --at', () => {
    expect(oneShotTime('+90s', now)).toEqual({ ok: true, at: new Date('2026-12-01T10:01:30Z') });
    expect(oneShotTime('2026-12-02T03:00+01:00', now)).toEqual({ ok: true, at: new Date('2026-12-02T02:00:00Z') });
    expect(oneShotTime('now', now)).toEqual({ ok: true, at: now });
    expect(oneShotTime('2026-12-02T02:00', now)).toMatchObject({ ok: false, reason: expect.stringContaining('with a zone') });
    expect(oneShotTime('2026-02-31T02:00:00Z', now)).toMatchObject({ ok: false });
    expect(oneShotTime('+soon', now)).toMatchObject({ ok: false });
  });

  it('takes --set values from the payload', () => {
    const maps = ['env.GIT_REF=$.ref', 'env.SHA=$.head_commit.id', 'env.FIRST=$.commits[0].id', "env.Q=$['a b']"].map((m) => {
      const p = payloadMapParse(m);
      if (!p.ok) throw new Error(p.reason);
      return p.map;
    });
    const payload = JSON.stringify({ ref: 'refs/heads/main', head_commit: { id: 'abc' }, commits: [{ id: 7 }], 'a b': true });
    expect(payloadSets(payload, maps)).toEqual({ sets: ['env.GIT_REF=refs/heads/main', 'env.SHA=abc', 'env.FIRST=7', 'env.Q=true'], problems: [] });
    expect(payloadSets('{}', maps.slice(0, 1))).toEqual({ sets: [], problems: ['--map env.GIT_REF=$.ref: no value at $.ref in the payload'] });
    expect(payloadSets('not json', maps.slice(0, 1)).problems).toEqual(['payload is not JSON, so --map values cannot be taken from it']);
    expect(payloadMapParse('env.X=ref')).toMatchObject({ ok: false });
  });

  it('verifies HMAC-SHA256 over timestamp.body within the window', () => {
    const body = Buffer.from('{"a":1}');
    const ts = String(Math.floor(now.getTime() / 1000));
    const sig = webhookSignature('s3cret', ts, body);
    expect(sig).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(webhookVerify({ secret: 's3cret', timestamp: ts, signature: sig, body, nowMs: now.getTime() + 299_000 })).toEqual({ ok: true });
    expect(webhookVerify({ secret: 's3cret', timestamp: ts, signature: sig, body, nowMs: now.getTime() + 301_000 })).toMatchObject({ ok: false });
    expect(webhookVerify({ secret: 'other', timestamp: ts, signature: sig, body, nowMs: now.getTime() })).toMatchObject({ ok: false });
    expect(webhookVerify({ secret: 's3cret', timestamp: ts, signature: sig.slice(0, -1), body, nowMs: now.getTime() })).toMatchObject({ ok: false });
  });
});
