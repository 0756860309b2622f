import pg from 'pg';

export interface Listener { stop(): Promise<void> }

/**
 * LISTEN on a channel over a dedicated connection, reconnecting after any failure, so
 * notifications from other processes (a CLI submit, another replica) wake this one at once.
 * onNotify() without a payload follows every (re)connect: notices sent meanwhile were lost.
 * onDown: the connection is gone, notices are being missed until the next onNotify().
 * With no URL (the store is a transaction pooler and no direct session was given) nothing
 * listens: the loops fall back to their polling cadence, and onNotify/onDown are never called
 * (a consumer that trusts notices must treat "never up" as "down").
 */
export function listenChannel(connectionString: string | null, channel: string, onNotify: (payload?: string) => void, onError: (err: Error) => void, onDown?: () => void): Listener {
  if (connectionString === null) return { stop: async () => {} };
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;
  const connect = async () => {
    if (stopped) return;
    const c = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000, keepAlive: true, application_name: 'opschain-listen' });
    client = c;
    c.on('notification', (msg) => onNotify(msg.payload));
    c.on('error', (err) => {
      onError(err);
      schedule();
    });
    c.on('end', () => schedule());
    try {
      await c.connect();
      await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      // Anything enqueued while we were away is picked up by this wake-up.
      onNotify();
    } catch (err) {
      onError(err as Error);
      schedule();
    }
  };
  const schedule = () => {
    if (stopped || retry) return;
    onDown?.();
    client?.removeAllListeners('end');
    client?.end().catch(() => {});
    client = undefined;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, 1_000);
  };
  void connect();
  return {
    async stop() {
      stopped = true;
      clearTimeout(retry);
      const c = client;
      client = undefined;
      c?.removeAllListeners('end');
      await c?.end().catch(() => {});
    },
  };
}
