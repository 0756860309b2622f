import { Flags } from '@oclif/core';
import { OpsCommand } from '../../src/cli/base.js';
import { table } from '../../src/cli/render.js';
import { Invalid } from '../../src/errors.js';
import type { OpsOutput } from '../../src/ops/index.js';
import { FLEET_DEMAND_HEAD, fleetDemandRows } from '../../src/views/fleet-demand.js';

const list = (v: string[] | undefined) => (v && v.length ? v.join(',') : undefined);

export default class FleetWhatIf extends OpsCommand<typeof FleetWhatIf> {
  static override description =
    'Tries levers against the current queue, fleet and policy, writing nothing: the same planner and verdicts the dispatcher uses decide which waiting entries the next tick would start and on which runner (every online, undrained runner with a free slot counted as polling), which would still wait and why, which running steps would be left on a removed or drained runner with no other runner matching them, which pinned runs would stall, and the demand after. Levers combine.';
  static override enableJsonFlag = true;
  static override examples = [
    '<%= config.bin %> fleet what-if --drain build-7',
    '<%= config.bin %> fleet what-if --undrain-group legacy --pool db=4',
    '<%= config.bin %> fleet what-if --add-runners 5 --group build --label linux --max-load 8 --json',
  ];
  static override flags = {
    'accept-exceeding': Flags.boolean({ description: 'judge oversized steps as the servers do (their dispatch.accept_exceeding)', allowNo: true, default: true, env: 'OPSCHAIN_ACCEPT_EXCEEDING' }),
    'add-runners': Flags.integer({ description: 'add N runners (with --group, --label, --max-load)', min: 1, max: 10_000 }),
    drain: Flags.string({ description: 'drain this runner (id or name; repeatable)', multiple: true }),
    'drain-group': Flags.string({ description: 'drain this group (repeatable)', multiple: true }),
    group: Flags.string({ description: 'the group the added runners join (its attributes; executors and max_load of one of its runners)' }),
    label: Flags.string({ description: 'a label of the added runners, `linux` or `k=v` (repeatable)', multiple: true }),
    limit: Flags.integer({ description: 'list at most this many entries that would still wait (counted in full)', default: 50, min: 0, max: 10_000 }),
    'max-load': Flags.string({ description: 'the max_load of the added runners' }),
    pool: Flags.string({ description: 'set a pool limit, P=N (repeatable)', multiple: true }),
    'remove-runner': Flags.string({ description: 'remove this runner from the fleet (repeatable)', multiple: true }),
    undrain: Flags.string({ description: 'undrain this runner (repeatable)', multiple: true }),
    'undrain-group': Flags.string({ description: 'undrain this group (repeatable)', multiple: true }),
    weight: Flags.string({ description: 'set a project\'s fair-share weight, PROJECT=W (repeatable)', multiple: true }),
  };
  static override summary = 'Dry-run levers through the real planner: what starts, what waits, what is stranded';

  async run(): Promise<OpsOutput<'fleetWhatIf'>> {
    const f = this.flags;
    const maxLoad = f['max-load'] === undefined ? undefined : Number(f['max-load']);
    if (maxLoad !== undefined && !(Number.isFinite(maxLoad) && maxLoad > 0)) throw new Invalid(`--max-load ${f['max-load']}: expected a number above 0`);
    const view = await (await this.ops()).fleetWhatIf({
      drain: list(f.drain),
      drainGroup: list(f['drain-group']),
      undrain: list(f.undrain),
      undrainGroup: list(f['undrain-group']),
      pool: list(f.pool),
      weight: list(f.weight),
      removeRunner: list(f['remove-runner']),
      addRunners: f['add-runners'],
      group: f.group,
      label: list(f.label),
      maxLoad,
      limit: f.limit,
      acceptExceeding: f['accept-exceeding'],
    });
    if (!this.jsonEnabled()) {
      this.log(`next tick: ${view.starts.length} would start (${view.startsBefore} without these levers), ${view.stays.total} would wait`);
      if (view.starts.length) {
        const t = table(['step', 'run', 'runner']);
        for (const s of view.starts) t.push([String(s.stepId), String(s.runId), s.runner]);
        this.log(t.toString());
      }
      if (view.stays.shown.length) {
        const t = table(['step', 'run', 'waits for', 'was', 'verdict']);
        for (const s of view.stays.shown) t.push([String(s.stepId), String(s.runId), s.reason, s.was, `${s.verdict.satisfiable ? '' : '✗ '}${s.verdict.reason}`]);
        this.log(t.toString());
        if (view.stays.shown.length < view.stays.total) this.log(`+${view.stays.total - view.stays.shown.length} more waiting`);
      }
      for (const o of view.orphaned) this.log(`left without a replacement runner: step ${o.stepId} of run ${o.runId} on ${o.runner}`);
      for (const p of view.stalled) this.log(`stalls: run ${p.runId} pinned to ${p.runner}, ${p.queued} step(s) queued`);
      const t = table(FLEET_DEMAND_HEAD);
      for (const row of fleetDemandRows({ groups: view.demand.groups, total: view.demand.after })) t.push(row);
      this.log(`demand after (capacity before: ${view.demand.before.capacity}):`);
      this.log(t.toString());
    }
    return view;
  }
}
