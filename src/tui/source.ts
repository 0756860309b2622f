import type { DrainResult } from '../store/fleet.js';
import type { AdminQueueView } from '../views/admin-queue.js';
import type { FleetWhatIfView } from '../views/fleet-demand.js';

/**
 * Where the console's snapshots come from: the store on this machine or a server over HTTP. The
 * dashboard and the pipe mode only ever see this interface, so either source gives the same view.
 */
export interface ConsoleSource {
  /** Shown in the header: the store's host/database, or the server's URL. */
  readonly name: string;
  /** One snapshot of the aggregate view (at most `limit` leases listed). */
  read(p: { limit: number }): Promise<AdminQueueView>;
  /** The `fleet drain` / `fleet undrain` lever on one runner. */
  drain(p: { runner: string; drained: boolean; reason?: string }): Promise<DrainResult>;
  /** `fleet what-if --drain|--undrain` on one runner: writes nothing. */
  whatIf?(p: { runner: string; drained: boolean }): Promise<FleetWhatIfView>;
  /** Calls `wake` when the store announces a change (LISTEN); returns how to stop listening. */
  subscribe?(wake: () => void): () => Promise<void>;
  close(): Promise<void>;
}
