import { afterAll, describe, expect, it } from 'vitest';
import { listenChannel, type Listener } from '../../src/store/listen.js';
import { useTestDatabase, waitFor } from '../support/db.js';

describe('listenChannel', () => {
  const db = useTestDatabase();
  const listeners: Listener[] = [];
  afterAll(async () => {
    for (const l of listeners) await l.stop();
  });

  /** The listener's own backends in this test's database. */
  const backends = async () =>
    (await db.current.pool.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name = 'opschain-listen' AND datname = current_database()`)).rows;

  it('reconnects after its connection is killed: it wakes once on the way back and hears notifications again; stop closes it', async () => {
    const heard: Array<string | undefined> = [];
    const errors: string[] = [];
    const l = listenChannel(db.current.url, 'opschain_listen_test', (p) => heard.push(p), (e) => errors.push(e.message));
    listeners.push(l);
    await waitFor(() => heard.length === 1, { what: 'the wake-up of the first connection' });
    expect(heard).toEqual([undefined]);
    await db.current.pool.query(`SELECT pg_notify('opschain_listen_test', 'before')`);
    await waitFor(() => heard.includes('before'), { what: 'a notification' });

    const [victim] = await backends();
    await db.current.pool.query(`SELECT pg_terminate_backend($1)`, [victim.pid]);
    await waitFor(() => errors.length > 0, { what: 'the lost connection reported' });
    await waitFor(async () => heard.length === 3 && (await backends()).some((b) => b.pid !== victim.pid), { what: 'a new connection and its wake-up' });
    expect(heard).toEqual([undefined, 'before', undefined]);
    await db.current.pool.query(`SELECT pg_notify('opschain_listen_test', 'after')`);
    await waitFor(() => heard.includes('after'), { what: 'a notification on the new connection' });

    await l.stop();
    expect(await backends()).toEqual([]);
  });
});
