import type { Scope } from './tokens.js';

/**
 * A fleet-wide posture, by the flag behind it (the fleet_posture column of that name). These
 * spellings are stored and on the wire (`applied`, `holds[].posture`, audit details), so the fleet
 * quiesce's flag stays `quiesced`.
 */
export type PostureField = 'quiesced' | 'halted' | 'system_quiesced';

interface PostureVerbSpec {
  /** The flags the verb sets. */
  fields: readonly PostureField[];
  /** What it sets them to: true puts them in force, false lifts them. */
  value: boolean;
  /**
   * Its audit action (`platform.halt`). The fleet quiesce's actions keep their first spelling,
   * `server.quiesce`/`server.resume`, so the audit log reads one name for it across releases.
   */
  action: string;
  /** Its HTTP path under /api/admin and its CLI topic/verb (`fleet/quiesce`: `fleet quiesce`). */
  route: string;
  /** A former path still served, deprecated: scripts written against it keep working. */
  deprecatedRoute?: string;
  /** What the audit row names as the target. */
  target: 'fleet' | 'platform';
  /** The least token scope that may pull it. */
  scope: Scope;
}

/**
 * Every posture verb, once: which flags it sets, to what, how it is audited and who may pull it.
 * The domain functions, the HTTP routes, the CLI commands and the leader's expiry pass all read
 * this table.
 */
export const POSTURE_VERBS = {
  fleetQuiesce: { fields: ['quiesced'], value: true, action: 'server.quiesce', route: 'fleet/quiesce', deprecatedRoute: 'server/quiesce', target: 'fleet', scope: 'levers' },
  fleetResume: { fields: ['quiesced'], value: false, action: 'server.resume', route: 'fleet/resume', deprecatedRoute: 'server/resume', target: 'fleet', scope: 'levers' },
  platformHalt: { fields: ['halted'], value: true, action: 'platform.halt', route: 'platform/halt', target: 'platform', scope: 'admin' },
  platformQuiesce: { fields: ['system_quiesced'], value: true, action: 'platform.quiesce', route: 'platform/quiesce', target: 'platform', scope: 'admin' },
  platformResume: { fields: ['halted', 'system_quiesced'], value: false, action: 'platform.resume', route: 'platform/resume', target: 'platform', scope: 'admin' },
} as const satisfies Record<string, PostureVerbSpec>;

export type PostureVerb = keyof typeof POSTURE_VERBS;

const verbOf = (field: PostureField, value: boolean): PostureVerbSpec => {
  const spec = Object.values(POSTURE_VERBS).find((v: PostureVerbSpec) => v.value === value && v.fields.includes(field));
  if (!spec) throw new Error(`no posture verb ${value ? 'pulls' : 'lifts'} ${field}`);
  return spec;
};

/** The audit action of pulling (on) or lifting (off) each posture, from POSTURE_VERBS. */
export const POSTURE_ACTIONS = Object.fromEntries(
  (['quiesced', 'halted', 'system_quiesced'] as const).map((f) => [f, { on: verbOf(f, true).action, off: verbOf(f, false).action, target: verbOf(f, true).target }]),
) as Record<PostureField, { on: string; off: string; target: string }>;
