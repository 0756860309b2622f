import { OpsCommand } from '../../src/cli/base.js';

export default class AdminReconcile extends OpsCommand<typeof AdminReconcile> {
  static override description = 'Wakes the leader\'s launch loop now and releases every launch it holds back (deferred by a cap, a ceiling or a queued overlap), so each is checked again at once instead of one discovery interval later.';
  static override enableJsonFlag = true;
  static override examples = ['<%= config.bin %> admin reconcile'];
  static override summary = 'Wake the launch loop';

  async run(): Promise<{ woken: true }> {
    const r = await (await this.ops()).adminReconcile({});
    if (!this.jsonEnabled()) this.log('launch loop woken; held launches released');
    return r;
  }
}
