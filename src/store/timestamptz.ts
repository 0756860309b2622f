import pg from 'pg';

const ZERO = 48;
const digit = (s: string, i: number): number => {
  const d = s.charCodeAt(i) - ZERO;
  return d >= 0 && d <= 9 ? d : NaN;
};
const two = (s: string, i: number): number => digit(s, i) * 10 + digit(s, i + 1);

/**
 * timestamptz as PostgreSQL writes it in the ISO date style, `YYYY-MM-DD HH:MM:SS[.ffffff]±HH[:MM[:SS]]`,
 * read without regular expressions: a busy server reads several per step (lease, step and run
 * rows), and pg's general parser was a few per cent of its CPU. Anything else (BC, infinity,
 * years beyond 9999) goes to `fallback`; the result is the same Date either way.
 */
export function parseTimestamptz(s: string, fallback: (s: string) => unknown): unknown {
  if (s.length < 22 || s.charCodeAt(4) !== 45 || s.charCodeAt(10) !== 32) return fallback(s);
  const year = digit(s, 0) * 1000 + digit(s, 1) * 100 + two(s, 2);
  const month = two(s, 5);
  const day = two(s, 8);
  const hour = two(s, 11);
  const minute = two(s, 14);
  const second = two(s, 17);
  let i = 19;
  let ms = 0;
  if (s.charCodeAt(i) === 46) {
    i++;
    let scale = 100;
    while (i < s.length && s.charCodeAt(i) >= ZERO && s.charCodeAt(i) <= ZERO + 9) {
      ms += (s.charCodeAt(i) - ZERO) * scale;
      scale /= 10;
      i++;
    }
    ms = Math.trunc(ms);
  }
  const sign = s.charCodeAt(i) === 43 ? 1 : s.charCodeAt(i) === 45 ? -1 : 0;
  if (sign === 0 || year < 100) return fallback(s);
  const rest = s.length - i - 1;
  if (rest !== 2 && rest !== 5 && rest !== 8) return fallback(s);
  let offset = two(s, i + 1) * 3600;
  if (rest >= 5) offset += two(s, i + 4) * 60;
  if (rest === 8) offset += two(s, i + 7);
  const t = Date.UTC(year, month - 1, day, hour, minute, second, ms) - sign * offset * 1000;
  return Number.isNaN(t) ? fallback(s) : new Date(t);
}

const TIMESTAMPTZ = 1184;

/** Installs parseTimestamptz for every pg client of this process. */
export function useFastTimestamptz(): void {
  const general = pg.types.getTypeParser(TIMESTAMPTZ, 'text') as (s: string) => unknown;
  pg.types.setTypeParser(TIMESTAMPTZ, (s: string) => parseTimestamptz(s, general));
}
