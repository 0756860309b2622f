import { Args } from '@oclif/core';
import { BaseCommand } from '../../../src/cli/base.js';
import { NotFoundError } from '../../../src/cli/errors.js';
import { replicaQuiesceSet, type ReplicaLeverResult } from '../../../src/coordination/levers.js';

export default class AdminReplicaResume extends BaseCommand<typeof AdminReplicaResume> {
  static override args = { id: Args.string({ description: 'replica id (see opschain admin status)', required: true }) };
  static override description = 'Bring a quiesced replica back into the membership: it takes its rendezvous shards again on the next ticks. Idempotent.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin replica resume web-1-3f9a2c'];
  static override summary = 'Bring a quiesced replica back';

  async run(): Promise<ReplicaLeverResult> {
    const { args } = await this.parse(AdminReplicaResume);
    const result = await replicaQuiesceSet(await this.store(), { id: args.id, quiesced: false, actor: 'cli', source: 'cli' });
    if (!result) throw new NotFoundError(`no replica with id ${args.id}`);
    if (!this.jsonEnabled()) this.log(result.changed ? `resumed ${result.id}` : `${result.id} was already in the membership`);
    return result;
  }
}
