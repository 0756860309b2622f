import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { installErrorHandler } from '../../src/api/errors.js';
import { asDomainError, EXIT_CODES } from '../../src/cli/errors.js';
import { isStoreUnavailable } from '../../src/store/pool.js';
import { useTestDatabase } from '../support/db.js';

describe('a statement timeout is not the store being unavailable', () => {
  const db = useTestDatabase();
  /** A statement the real store cancels after its statement timeout. */
  const slowStatement = async () => {
    const client = await db.current.pool.connect();
    try {
      await client.query(`SET statement_timeout = 50`);
      await client.query(`SELECT pg_sleep(5)`);
    } finally {
      await client.query(`RESET statement_timeout`).catch(() => {});
      client.release();
    }
  };

  it('the CLI maps it to a failure (exit 1) naming the timeout, not exit 5 "store unavailable"', async () => {
    const err = await slowStatement().then(() => undefined, (e: unknown) => e);
    expect((err as { code?: string }).code).toBe('57014');
    expect(isStoreUnavailable(err)).toBe(false);
    const mapped = asDomainError(err, { url: db.current.url, from: 'test' });
    expect(mapped).toMatchObject({ kind: 'failed', code: 'statement_timeout' });
    expect(mapped!.message).toMatch(/statement timeout \(SQLSTATE 57014\).*retrying it unchanged will not help/);
    expect(mapped!.message).not.toMatch(/unavailable|retry\)/);
    expect(EXIT_CODES[mapped!.kind]).toBe(1);
  });

  it('the API answers 422 statement_timeout, never 503 store_unavailable with its retry verdict', async () => {
    const app = Fastify();
    installErrorHandler(app);
    app.get('/slow', async () => {
      await slowStatement();
      return {};
    });
    try {
      const res = await app.inject({ method: 'GET', url: '/slow' });
      expect(res.statusCode).toBe(422);
      expect(res.json().error.code).toBe('statement_timeout');
      expect(res.json().error.message).not.toMatch(/store unavailable/);
    } finally {
      await app.close();
    }
  });
});
