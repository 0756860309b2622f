import type { Ops } from '../ops/index.js';
import { COORDINATION_CHANNEL } from '../store/coordination.js';
import { listenChannel } from '../store/listen.js';
import { QUEUE_CHANNEL } from '../store/queue.js';
import type { ConsoleSource } from '../tui/source.js';

/**
 * The console's source: the `admin queue` operation through whichever transport the command
 * resolved (the store on this machine, or a server with --server/--token), the same view either
 * way. With the store at hand it also LISTENs for the queue's and the coordination's change
 * notifications, so a refresh follows a change at once; over HTTP it refreshes on the interval.
 * Behind a transaction pooler, whose sessions cannot keep a LISTEN, `listenDatabaseUrl` names a
 * direct session for it (as the servers' listen_database_url does).
 */
export function opsConsoleSource(p: { ops: Ops; acceptExceeding: boolean; server?: string; databaseUrl?: string; listenDatabaseUrl?: string }): ConsoleSource {
  let name = p.server ?? 'store';
  if (!p.server && p.databaseUrl) {
    try {
      const u = new URL(p.listenDatabaseUrl ?? p.databaseUrl);
      name = `${u.hostname}:${u.port || 5432}${u.pathname}`;
    } catch {
      // an unparsable URL still works for pg; the header just says "store"
    }
  }
  const listenUrl = p.server ? undefined : (p.listenDatabaseUrl ?? p.databaseUrl);
  return {
    name,
    read: ({ limit }) => p.ops.adminQueue({ limit, acceptExceeding: p.acceptExceeding }),
    drain: ({ runner, drained, reason }) => (drained ? p.ops.fleetDrain : p.ops.fleetUndrain)({ runner, reason }),
    whatIf: ({ runner, drained }) => p.ops.fleetWhatIf(drained ? { drain: runner, limit: 0 } : { undrain: runner, limit: 0 }),
    ...(listenUrl
      ? {
          subscribe(wake: () => void) {
            const quiet = () => {};
            const listeners = [QUEUE_CHANNEL, COORDINATION_CHANNEL].map((channel) => listenChannel(listenUrl, channel, () => wake(), quiet));
            return async () => {
              await Promise.all(listeners.map((l) => l.stop()));
            };
          },
        }
      : {}),
    close: async () => {},
  };
}
