import { Flags } from '@oclif/core';
import { fleetPostureLever, type PostureLeverResult } from '../dispatch/postures.js';
import type { PostureField } from '../store/posture.js';
import { BaseCommand } from './base.js';

/** The four fleet posture verbs differ only in which flag they set and what they say. */
export abstract class PostureLeverCommand extends BaseCommand<typeof PostureLeverCommand> {
  static override enableJsonFlag = true;
  static override flags = {
    reason: Flags.string({ description: 'why, recorded on the posture row and in the audit log' }),
  };

  protected abstract readonly field: PostureField;
  protected abstract readonly value: boolean;
  /** What a change says on a terminal. */
  protected abstract readonly done: string;

  async run(): Promise<PostureLeverResult> {
    const actor = process.env.USER ? `cli:${process.env.USER}` : 'cli';
    const result = await fleetPostureLever(await this.store(), { field: this.field, value: this.value, reason: this.flags.reason, actor, source: 'cli' });
    if (!this.jsonEnabled()) this.log(result.changed ? this.done : 'already so: nothing changed');
    return result;
  }
}
