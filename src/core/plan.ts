import type { QueueEntry, Waiter } from './entry.js';

/** Limits and current holders of the pools a batch demands; a pool absent here is unlimited. */
export type PoolState = Map<string, { limit: number; held: number }>;

export interface PlanInput {
  /** This tick's claims, in claim order. */
  claims: QueueEntry[];
  /** The acquire calls parked at the tick's start. */
  waiters: Waiter[];
  pools: PoolState;
  /** run id → pinned runner id. */
  pins: Map<number, string>;
  /** run id → how many of its steps are out (leased and delivered) right now. */
  outstandingByRun: Map<number, number>;
  acceptExceeding: boolean;
}

export interface Delivery { entry: QueueEntry; waiter: Waiter; /** this delivery creates the run's pin */ pin: boolean }
export interface PlanOutput {
  deliveries: Delivery[];
  /** Claims that go back to the queue at their original position, with why. */
  returned: Array<{ entry: QueueEntry; reason: string }>;
}

/**
 * Decides, for one dispatch tick, which claim goes to which parked waiter. Pure: the dispatcher
 * and the inspection views call the same function.
 */
export function planDelivery(input: PlanInput): PlanOutput {
  const order = [...input.claims].sort((a, b) => a.lane - b.lane || a.position - b.position);
  const slots = new Map(input.waiters.map((w) => [w.runnerId, w.slots]));
  const deliveries: Delivery[] = [];
  const returned: PlanOutput['returned'] = [];
  for (const entry of order) {
    const waiter = input.waiters.find((w) => !w.drained && (slots.get(w.runnerId) ?? 0) > 0 && (w.onlyRunId === null || w.onlyRunId === entry.runId));
    if (!waiter) {
      returned.push({ entry, reason: 'no parked runner can take it' });
      continue;
    }
    slots.set(waiter.runnerId, (slots.get(waiter.runnerId) ?? 0) - 1);
    deliveries.push({ entry, waiter, pin: false });
  }
  return { deliveries, returned };
}
