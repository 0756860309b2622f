import fc from 'fast-check';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import '../../src/store/pool.js';
import { parseTimestamptz } from '../../src/store/timestamptz.js';
import { useTestDatabase } from '../support/db.js';

// pg's own parser for timestamptz (the one the pool replaces).
const postgresDate = createRequire(import.meta.url)('postgres-date') as (s: string) => unknown;
const general = (s: string) => postgresDate(s);
const pad = (n: number, w: number) => String(n).padStart(w, '0');

describe('timestamptz parsing', () => {
  it('gives the Date pg\'s general parser gives, for every ISO form PostgreSQL writes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 100, max: 9999 }), fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 28 }),
        fc.integer({ min: 0, max: 23 }), fc.integer({ min: 0, max: 59 }), fc.integer({ min: 0, max: 59 }),
        fc.option(fc.stringMatching(/^[0-9]{1,6}$/)), fc.constantFrom('+', '-'), fc.integer({ min: 0, max: 15 }),
        fc.constantFrom(null, 0, 30, 45), fc.constantFrom(null, 0, 17),
        (y, mo, d, h, mi, s, frac, sign, oh, om, os) => {
          const zone = `${sign}${pad(oh, 2)}${om === null ? '' : `:${pad(om, 2)}${os === null ? '' : `:${pad(os, 2)}`}`}`;
          const text = `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)} ${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}${frac === null ? '' : `.${frac}`}${zone}`;
          const fast = parseTimestamptz(text, general) as Date;
          const slow = general(text) as Date;
          expect(fast.getTime()).toBe(slow.getTime());
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('leaves what it does not read to the general parser', () => {
    for (const text of ['infinity', '-infinity', '0044-03-15 12:00:00+00 BC', '12345-01-01 00:00:00+00', '0099-01-01 00:00:00+00']) {
      expect(parseTimestamptz(text, general)).toEqual(general(text));
    }
  });

  const db = useTestDatabase();
  it('reads what the server writes, in any session time zone', async () => {
    const client = await db.current.pool.connect();
    try {
      for (const zone of ['UTC', 'Asia/Kolkata', 'America/St_Johns', 'Pacific/Chatham']) {
        await client.query(`SET TIME ZONE '${zone}'`);
        const { rows } = await client.query(`SELECT t, extract(epoch FROM t)::float8 AS epoch FROM (VALUES (now()), (timestamptz '2024-02-29 23:59:59.999999+00'), (timestamptz '1901-12-13 20:45:52+00')) v(t)`);
        for (const r of rows) expect((r.t as Date).getTime()).toBe(Math.floor(r.epoch * 1000 + 1e-6));
      }
    } finally {
      await client.query(`SET TIME ZONE 'UTC'`);
      client.release();
    }
  });
});
