import type { PostureField } from '../core/postures.js';

/**
 * A lever announced on the queue channel at the commit that pulled it (triggers of migration 0009,
 * whoever wrote it): the posture flags in force after a posture changed, or a runner or a group
 * drained or undrained.
 */
export type LeverNotice =
  | { lever: 'posture'; inForce: PostureField[] }
  | { lever: 'drain'; target: 'runner' | 'group'; name: string; drained: boolean };

const FLAGS: ReadonlySet<string> = new Set<PostureField>(['quiesced', 'halted', 'system_quiesced']);
const DRAIN = /^drain:(runner|group):(on|off):(.+)$/s;

/** The lever a queue-channel payload announces, or null: it announces work or a freed pool slot. */
export function leverNoticeOf(payload: string | undefined): LeverNotice | null {
  if (payload === undefined) return null;
  if (payload.startsWith('posture:')) {
    const flags = payload.slice('posture:'.length).split(',');
    return { lever: 'posture', inForce: flags.filter((f): f is PostureField => FLAGS.has(f)) };
  }
  const m = DRAIN.exec(payload);
  return m ? { lever: 'drain', target: m[1] as 'runner' | 'group', name: m[3], drained: m[2] === 'on' } : null;
}
