export type ReplicaState = 'live' | 'dead' | 'quiesced' | 'stopped';

/** State precedence: a clean stop is final; a silent replica is dead even if it was quiesced. */
export function replicaState(r: { stoppedAt: Date | null; quiesced: boolean; heartbeatAgeMs: number }, stalenessMs: number): ReplicaState {
  if (r.stoppedAt) return 'stopped';
  if (r.heartbeatAgeMs > stalenessMs) return 'dead';
  if (r.quiesced) return 'quiesced';
  return 'live';
}
