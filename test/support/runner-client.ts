/** A minimal protocol client for tests: raw HTTP calls with status and body. */
export class TestRunner {
  credential = '';
  runnerId = '';
  constructor(readonly base: string) {}

  async call(path: string, body: unknown, opts: { auth?: boolean; signal?: AbortSignal } = {}): Promise<{ status: number; body: any }> {
    const res = await fetch(`${this.base}/api/runner/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(opts.auth === false ? {} : { authorization: `Bearer ${this.credential}` }) },
      body: JSON.stringify(body),
      signal: opts.signal,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  async register(registrationToken: string, extra: Record<string, unknown> = {}): Promise<this> {
    const r = await this.call('register', { registration_token: registrationToken, name: `test-runner-${Math.random().toString(36).slice(2, 10)}`, ...extra }, { auth: false });
    if (r.status !== 201) throw new Error(`register failed: ${r.status} ${JSON.stringify(r.body)}`);
    this.credential = r.body.credential;
    this.runnerId = r.body.runner_id;
    return this;
  }

  acquire(body: Record<string, unknown> = {}, signal?: AbortSignal) {
    return this.call('acquire', { request_id: `req-${Math.random().toString(36).slice(2)}`, wait_ms: 5_000, ...body }, { signal });
  }
}
