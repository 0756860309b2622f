import { Flags } from '@oclif/core';
import { LeverInputError, parseUntil, postureLever, type PostureLeverResult } from '../dispatch/postures.js';
import type { PostureField } from '../store/posture.js';
import { BaseCommand } from './base.js';
import { UserError } from './errors.js';
import { cliActor } from './runs.js';

/** The fleet and platform posture verbs differ only in which postures they set and what they say. */
export abstract class PostureLeverCommand extends BaseCommand<typeof PostureLeverCommand> {
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

  async run(): Promise<PostureLeverResult> {
    try {
      const until = this.flags.until === undefined ? undefined : parseUntil(this.flags.until);
      const result = await postureLever(await this.store(), { fields: this.fields, value: this.value, reason: this.flags.reason, until, actor: `cli:${cliActor()}`, source: 'cli' });
      if (!this.jsonEnabled()) {
        const hold = result.posture.holds.find((h) => this.fields.includes(h.posture));
        const untilText = hold?.until ? ` until ${hold.until}` : '';
        if (result.changed) this.log(`${this.done}${this.value ? untilText : ''}`);
        else if (result.untilMoved) this.log(`${this.already}; it now lifts${untilText}`);
        else this.log(`${this.already}: nothing changed`);
      }
      return result;
    } catch (err) {
      if (err instanceof LeverInputError) throw new UserError(err.message);
      throw err;
    }
  }
}
