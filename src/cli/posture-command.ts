import { Flags } from '@oclif/core';
import type { OpsOutput } from '../ops/index.js';
import { POSTURE_VERBS, type PostureField, type PostureVerb } from '../core/postures.js';
import { OpsCommand } from './base.js';

/** The fleet and platform posture verbs differ only in which postures they set and what they say. */
export abstract class PostureLeverCommand extends OpsCommand<typeof PostureLeverCommand> {
  static override enableJsonFlag = true;
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture and in the audit log' }),
    until: Flags.string({ description: 'lift it automatically after a duration (30m, 2h) or at an ISO time (2026-12-01T18:00:00Z); the leader lifts it, audited' }),
  };

  /** Its row of POSTURE_VERBS: the postures it sets and to what. */
  protected abstract readonly verb: PostureVerb;
  /** What a change says on a terminal. */
  protected abstract readonly done: string;
  /** What a repeat says: it already was so. */
  protected abstract readonly already: string;

  async run(): Promise<OpsOutput<PostureVerb>> {
    const { fields, value } = POSTURE_VERBS[this.verb];
    const result = await (await this.ops())[this.verb]({ reason: this.flags.reason, until: this.flags.until });
    if (!this.jsonEnabled()) {
      const hold = result.posture.holds.find((h) => (fields as readonly PostureField[]).includes(h.posture));
      const untilText = hold?.until ? ` until ${hold.until}` : '';
      if (result.changed) this.log(`${this.done}${value ? untilText : ''}`);
      else if (result.untilMoved) this.log(`${this.already}; it now lifts${untilText}`);
      else this.log(`${this.already}: nothing changed`);
    }
    return result;
  }
}
