import { SHARD_COUNT } from './entry.js';
import { fnv1a } from './fnv.js';

/**
 * Highest-random-weight (rendezvous) assignment of the fixed shard space over the live replicas.
 *
 * Every replica computes the same answer from the same membership, with no coordination: each
 * shard goes to the replica with the largest weight(replica, shard). Because a shard's winner
 * depends only on the weights of the replicas present, a departure moves exactly the departed
 * replica's shards and a join moves shards only to the newcomer.
 */

/** murmur3's 32-bit finaliser: FNV-1a alone leaves neighbouring inputs (shard 7 vs 8) correlated. */
function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * The weight of a replica for a shard: 52 well-mixed bits (two independently finalised 32-bit
 * halves), so ties between distinct replicas are practically impossible; the id breaks any left.
 */
export function rendezvousWeight(replicaId: string, shard: number): number {
  const base = fnv1a(`${replicaId}\u0000${shard}`);
  const hi = fmix32(base ^ Math.imul(shard + 1, 0x9e3779b9));
  const lo = fmix32(Math.imul(base, 0x27d4eb2d) ^ 0x165667b1);
  return hi * 2 ** 20 + (lo >>> 12);
}

function beats(a: string, wa: number, b: string, wb: number): boolean {
  return wa > wb || (wa === wb && a < b);
}

/** The owner of one shard among the given replicas, or undefined when there are none. */
export function shardOwner(replicaIds: readonly string[], shard: number): string | undefined {
  let best: string | undefined;
  let bestWeight = -1;
  for (const id of replicaIds) {
    const w = rendezvousWeight(id, shard);
    if (best === undefined || beats(id, w, best, bestWeight)) {
      best = id;
      bestWeight = w;
    }
  }
  return best;
}

/** Owner of every shard, indexed by shard number. Duplicate ids count once. */
export function shardAssignment(replicaIds: readonly string[], shardCount = SHARD_COUNT): Array<string | undefined> {
  const ids = [...new Set(replicaIds)];
  return Array.from({ length: shardCount }, (_, shard) => shardOwner(ids, shard));
}

/** The shards one replica owns among the live set (empty when it is not in the set), ascending. */
export function shardsOf(replicaId: string, liveIds: readonly string[], shardCount = SHARD_COUNT): number[] {
  if (!liveIds.includes(replicaId)) return [];
  const owners = shardAssignment(liveIds, shardCount);
  const mine: number[] = [];
  owners.forEach((owner, shard) => {
    if (owner === replicaId) mine.push(shard);
  });
  return mine;
}

export interface ShardSpread {
  replicas: number;
  min: number;
  max: number;
  mean: number;
  stddev: number;
}

/** How evenly the shards fall over one membership: shards per replica, min/max/population stddev. */
export function shardSpread(replicaIds: readonly string[], shardCount = SHARD_COUNT): ShardSpread {
  const ids = [...new Set(replicaIds)];
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const owner of shardAssignment(ids, shardCount)) if (owner !== undefined) counts.set(owner, counts.get(owner)! + 1);
  const values = [...counts.values()];
  const mean = values.length ? shardCount / values.length : 0;
  const variance = values.length ? values.reduce((s, v) => s + (v - mean) ** 2, 0) / values.length : 0;
  return {
    replicas: ids.length,
    min: values.length ? Math.min(...values) : 0,
    max: values.length ? Math.max(...values) : 0,
    mean,
    stddev: Math.sqrt(variance),
  };
}
