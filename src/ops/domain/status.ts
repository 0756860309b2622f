import { SHARD_COUNT } from '../../core/entry.js';
import { postureStatus, type PostureJson } from './postures.js';
import { coordinationLeaseList, LEADER_LEASE, shardOfLeaseName } from '../../store/coordination.js';
import { storeNow } from '../../store/pool.js';
import type { Pool, PoolClient } from '../../store/pool.js';
import { replicaList, type ReplicaRow } from '../../store/replicas.js';
import type { Wire } from '../../core/wire.js';
import { DEFAULT_TIMING } from '../../coordination/coordinator.js';
import { replicaState, type ReplicaState } from '../../core/replica-state.js';

export { replicaState, type ReplicaState };

export type ReplicaStatus = Wire<Omit<ReplicaRow, 'quiesced' | 'stoppedAt'>> & {
  state: ReplicaState;
  /** Shards whose lease this replica holds now, ascending. */
  shards: number[];
  leader: boolean;
};

export interface AdminStatus {
  /** The database clock at the time of the read. */
  at: string;
  replicas: ReplicaStatus[];
  leader: { replicaId: string; token: number; since: string; expiresAt: string } | null;
  shards: { total: number; owned: number; unowned: number[] };
  postures: PostureJson;
  stalenessMs: number;
}

/** Every replica with its state and shards, the leader, the fleet postures (a handful of reads, no locks). */
export async function adminStatusRead(db: Pool | PoolClient, p: { stalenessMs?: number } = {}): Promise<AdminStatus> {
  const stalenessMs = p.stalenessMs ?? DEFAULT_TIMING.stalenessMs;
  const [at, replicas, leases, posture] = await Promise.all([storeNow(db), replicaList(db), coordinationLeaseList(db), postureStatus(db)]);
  const shardsBy = new Map<string, number[]>();
  const ownedShards = new Set<number>();
  for (const l of leases) {
    const s = shardOfLeaseName(l.name);
    if (s === undefined) continue;
    ownedShards.add(s);
    shardsBy.set(l.holder, [...(shardsBy.get(l.holder) ?? []), s]);
  }
  const leaderLease = leases.find((l) => l.name === LEADER_LEASE);
  return {
    at: at.toISOString(),
    replicas: replicas.map((r) => ({
      id: r.id,
      host: r.host,
      site: r.site,
      version: r.version,
      httpAddress: r.httpAddress,
      startedAt: r.startedAt.toISOString(),
      heartbeatAt: r.heartbeatAt.toISOString(),
      heartbeatAgeMs: Math.max(0, r.heartbeatAgeMs),
      state: replicaState(r, stalenessMs),
      shards: (shardsBy.get(r.id) ?? []).sort((a, b) => a - b),
      leader: leaderLease?.holder === r.id,
    })),
    leader: leaderLease
      ? { replicaId: leaderLease.holder, token: leaderLease.token, since: leaderLease.acquiredAt.toISOString(), expiresAt: leaderLease.expiresAt.toISOString() }
      : null,
    shards: { total: SHARD_COUNT, owned: ownedShards.size, unowned: Array.from({ length: SHARD_COUNT }, (_, i) => i).filter((s) => !ownedShards.has(s)) },
    postures: posture,
    stalenessMs,
  };
}
