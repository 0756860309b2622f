import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parsePair } from '../../src/cli/kv.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class GroupsSet extends OpsCommand<typeof GroupsSet> {
  static override args = { name: Args.string({ description: 'group name (a runner\'s --group)', required: true }) };
  static override description =
    'Create or update a runner group: its attributes (what placement selectors match, e.g. location=dc1) and whether it is exclusive (its runners take only work that names the group). Attributes merge into the existing ones; --attr key= removes a key. Placement reads the change on the next dispatch tick.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> groups set prod-runners --attr location=dc1 --exclusive', '<%= config.bin %> groups set prod-runners --no-exclusive --attr tier='];
  static override flags = {
    attr: Flags.string({ description: 'attribute key=value (repeatable); key= removes it', multiple: true, default: [] }),
    exclusive: Flags.boolean({ description: 'its runners take only work targeted at the group', allowNo: true }),
  };
  static override summary = 'Set a runner group\'s attributes and exclusive flag';

  async run(): Promise<OpsOutput<'groupsSet'>> {
    const { args } = await this.parse(GroupsSet);
    const attributes: Record<string, string | null> = {};
    for (const raw of this.flags.attr) {
      const [k, v] = parsePair('attr', raw, { allowEmptyValue: true });
      attributes[k] = v === '' ? null : v;
    }
    const row = await (await this.ops()).groupsSet({ name: args.name, attributes, exclusive: this.flags.exclusive });
    if (!this.jsonEnabled()) this.log(`group ${row.name}: ${JSON.stringify(row.attributes)}${row.exclusive ? ', exclusive' : ''}`);
    return row;
  }
}
