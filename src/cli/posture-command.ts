import { Flags } from '@oclif/core';
import type { OpsOutput } from '../ops/index.js';
import type { PostureVerb } from '../ops/domain/levers.js';
import type { PostureField } from '../store/posture.js';
import { OpsCommand } from './base.js';

/** Which verb of the operations layer pulls these postures this way. */
function postureVerb(fields: PostureField[], value: boolean): PostureVerb {
  const key = `${[...fields].sort().join('+')}:${value}`;
  const verbs: Record<string, PostureVerb> = {
    'quiesced:true': 'serverQuiesce',
    'quiesced:false': 'serverResume',
    'halted:true': 'platformHalt',
    'system_quiesced:true': 'platformQuiesce',
    'halted+system_quiesced:false': 'platformResume',
  };
  const verb = verbs[key];
  if (!verb) throw new Error(`no posture verb pulls ${key}`);
  return verb;
}

/** The fleet and platform posture verbs differ only in which postures they set and what they say. */
export abstract class PostureLeverCommand extends OpsCommand<typeof PostureLeverCommand> {
  static override enableJsonFlag = true;
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture and in the audit log' }),
    until: Flags.string({ description: 'lift it automatically after a duration (30m, 2h) or at an ISO time (2026-12-01T18:00:00Z); the leader lifts it, audited' }),
  };

  protected abstract readonly fields: PostureField[];
  protected abstract readonly value: boolean;
  /** What a change says on a terminal. */
  protected abstract readonly done: string;
  /** What a repeat says: it already was so. */
  protected abstract readonly already: string;

  async run(): Promise<OpsOutput<PostureVerb>> {
    const verb = postureVerb(this.fields, this.value);
    const result = await (await this.ops())[verb]({ reason: this.flags.reason, until: this.flags.until });
    if (!this.jsonEnabled()) {
      const hold = result.posture.holds.find((h) => this.fields.includes(h.posture));
      const untilText = hold?.until ? ` until ${hold.until}` : '';
      if (result.changed) this.log(`${this.done}${this.value ? untilText : ''}`);
      else if (result.untilMoved) this.log(`${this.already}; it now lifts${untilText}`);
      else this.log(`${this.already}: nothing changed`);
    }
    return result;
  }
}
