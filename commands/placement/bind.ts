import { Args, Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { parseSelectors } from '../../src/cli/kv.js';
import type { PlacementRequirement } from '../../src/core/entry.js';
import type { OpsOutput } from '../../src/ops/index.js';

export default class PlacementBind extends OpsCommand<typeof PlacementBind> {
  static override args = { path: Args.string({ description: 'target path prefix, e.g. acme/prod (binds acme/prod and acme/prod/*)', required: true }) };
  static override description =
    'Bind a target path prefix to a placement requirement. Steps of runs whose target is the path or lies under it, and that name no placement of their own or in the run, are placed by the longest matching binding, resolved once at enqueue. Binding a bound path replaces its requirement.';
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> placement bind acme/prod --group prod-runners',
    '<%= config.bin %> placement bind acme/eu --selector location=dc1,dc2 --label linux --executor shell',
  ];
  static override flags = {
    executor: Flags.string({ description: 'an executor the runner must offer (repeatable)', multiple: true, default: [] }),
    group: Flags.string({ description: 'a runner group; repeat for a set of groups (membership)', multiple: true, default: [] }),
    label: Flags.string({ description: 'a label the runner must carry (repeatable)', multiple: true, default: [] }),
    selector: Flags.string({ description: 'group attribute in a set: key=v1,v2 (repeatable; repeats of a key add to its set)', multiple: true, default: [] }),
  };
  static override summary = 'Bind a target path to a placement requirement';

  async run(): Promise<OpsOutput<'placementsBind'>> {
    const { args } = await this.parse(PlacementBind);
    const { group, selector, label, executor } = this.flags;
    const requirement: PlacementRequirement = {};
    if (group.length) requirement.group = group.length === 1 ? group[0] : [...new Set(group)];
    if (selector.length) requirement.selectors = parseSelectors(selector);
    if (label.length) requirement.labels = [...new Set(label)];
    if (executor.length) requirement.executors = [...new Set(executor)];
    const row = await (await this.ops()).placementsBind({ path: args.path, requirement });
    if (!this.jsonEnabled()) this.log(`bound ${row.path} → ${JSON.stringify(row.requirement)}`);
    return row;
  }
}
