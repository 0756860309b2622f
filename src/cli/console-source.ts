import { DEFAULT_TIMING } from '../coordination/coordinator.js';
import { adminQueueRead } from '../store/admin-queue.js';
import { COORDINATION_CHANNEL } from '../store/coordination.js';
import { listenChannel } from '../store/listen.js';
import type { Pool } from '../store/pool.js';
import { QUEUE_CHANNEL } from '../store/queue.js';
import type { ConsoleSource } from '../tui/source.js';
import { buildAdminQueue, type AdminQueueView } from '../views/admin-queue.js';
import { fleetDrain, fleetUndrain } from '../ops/fleet.js';
import { cliActor } from './runs.js';

/** The aggregate view straight from the store: one snapshot, built into the view the API serves too. */
export async function adminQueueView(pool: Pool, p: { limit: number; acceptExceeding: boolean }): Promise<AdminQueueView> {
  return buildAdminQueue(await adminQueueRead(pool, { limit: p.limit }), { acceptExceeding: p.acceptExceeding, stalenessMs: DEFAULT_TIMING.stalenessMs });
}

/** The console fed by the store on this machine; woken by the queue and coordination channels. */
export function storeConsoleSource(p: { pool: Pool; databaseUrl: string; acceptExceeding: boolean; actor?: string }): ConsoleSource {
  let name = 'store';
  try {
    const u = new URL(p.databaseUrl);
    name = `${u.hostname}:${u.port || 5432}${u.pathname}`;
  } catch {
    // an unparsable URL still works for pg; the header just says "store"
  }
  return {
    name,
    read: ({ limit }) => adminQueueView(p.pool, { limit, acceptExceeding: p.acceptExceeding }),
    drain: ({ runner, drained, reason }) => (drained ? fleetDrain : fleetUndrain)({ pool: p.pool, actor: p.actor ?? `console:${cliActor()}`, source: 'console' }, { runner, reason }),
    subscribe(wake) {
      const quiet = () => {};
      const listeners = [QUEUE_CHANNEL, COORDINATION_CHANNEL].map((channel) => listenChannel(p.databaseUrl, channel, () => wake(), quiet));
      return async () => {
        await Promise.all(listeners.map((l) => l.stop()));
      };
    },
    close: async () => {},
  };
}
