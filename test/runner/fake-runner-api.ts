import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { LogChunk, Offer } from '../../src/runner/protocol.js';

type Injected = { status: number; error: string } | 'drop-before' | 'drop-after';

/**
 * A protocol double for the runner client and agent: the answers of docs/runner-protocol.md,
 * served from memory, with failures the tests inject (503s, dropped connections, fenced tokens).
 * The real server is exercised by the end-to-end tests.
 */
export class FakeRunnerApi {
  readonly calls: Array<{ path: string; body: any; auth?: string }> = [];
  readonly logs = new Map<number, LogChunk[]>();
  readonly completions: any[] = [];
  readonly releases: any[] = [];
  readonly revoked = new Set<string>();
  credentialValid = true;
  /** Answer as a server that predates complete-and-acquire: an acquire carrying completions is a 400. */
  refuseCarried = false;
  url = '';
  private server?: Server;
  private sockets = new Set<Socket>();
  private ready: Offer[] = [];
  private answers = new Map<string, Offer[]>();
  private inject = new Map<string, Injected[]>();
  private waiters: Array<() => void> = [];

  async start(): Promise<string> {
    this.server = createServer((req, res) => void this.handle(req, res));
    this.server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    for (const w of this.waiters.splice(0)) w();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  offer(...offers: Array<Partial<Offer> & { step_id: number }>): void {
    for (const o of offers) {
      this.ready.push({ run_id: 1, attempt: 1, token: `t${o.step_id}`, step: `s${o.step_id}`, command: 'true', env: {}, timeout_ms: null, lease_ttl_ms: 180_000, ack_deadline_ms: 30_000, renew_interval_ms: 60_000, max_parallel_steps: 1, run_scope: false, ...o });
    }
    for (const w of this.waiters.splice(0)) w();
  }

  /** The next calls to path answer these instead (in order). */
  failNext(path: string, ...how: Injected[]): void {
    this.inject.set(path, [...(this.inject.get(path) ?? []), ...how]);
  }

  callsTo(path: string) {
    return this.calls.filter((c) => c.path === path);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of req) raw += chunk;
    const path = (req.url ?? '').replace('/api/runner/', '');
    const body = raw ? JSON.parse(raw) : {};
    this.calls.push({ path, body, auth: req.headers.authorization });
    const send = (status: number, payload?: unknown) => {
      if (payload === undefined) {
        res.writeHead(status).end();
      } else {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(payload));
      }
    };
    const injected = this.inject.get(path)?.shift();
    if (injected === 'drop-before') return void req.socket.destroy();
    if (injected && typeof injected === 'object') return send(injected.status, { error: injected.error });
    if (path !== 'register' && !this.credentialValid) return send(401, { error: 'credential invalid' });
    const answer = await this.answer(path, body);
    if (injected === 'drop-after') return void req.socket.destroy();
    send(answer.status, answer.body);
  }

  private async answer(path: string, body: any): Promise<{ status: number; body?: unknown }> {
    const fenced = (token: string) => this.revoked.has(token);
    const items = (list: Array<{ step_id: number; token: string }>) => ({
      status: 200,
      body: { results: list.map((l) => (fenced(l.token) ? { step_id: l.step_id, ok: false, status: 409, error: 'lease expired or revoked' } : { step_id: l.step_id, ok: true })) },
    });
    switch (path) {
      case 'register':
        if (body.registration_token !== 'ocreg_good') return { status: 401, body: { error: 'credential invalid' } };
        return { status: 201, body: { runner_id: 'rnr_fake', credential: 'ocrnr_fake', lease_ttl_ms: 180_000, poll_window_ms: 1_000 } };
      case 'acquire': {
        // Complete-and-acquire: carried completions are recorded first, and the call is answered at once.
        if (this.refuseCarried && body.completions !== undefined) return { status: 400, body: { error: { code: 'invalid_input', message: 'completions: unknown field' } } };
        const carried: any[] | undefined = body.completions?.length ? body.completions : undefined;
        const withResults = (offers: Offer[]) => ({ status: 200, body: { offers, ...(carried ? { results: items(carried).body.results } : {}) } });
        if (carried) this.completions.push(...carried.filter((c: any) => !fenced(c.token) && !this.completions.some((d) => d.step_id === c.step_id && d.token === c.token)));
        const known = this.answers.get(body.request_id);
        if (known) return withResults(known);
        if (carried) {
          const offers = this.ready.splice(0, body.max_offers ?? 1);
          if (offers.length > 0) this.answers.set(body.request_id, offers);
          return withResults(offers);
        }
        if (this.ready.length === 0) {
          await new Promise<void>((r) => {
            const t = setTimeout(r, Math.min(body.wait_ms ?? 1000, 1000));
            this.waiters.push(() => {
              clearTimeout(t);
              r();
            });
          });
        }
        if (this.ready.length === 0) return { status: 204 };
        const offers = this.ready.splice(0, body.max_offers ?? 1);
        this.answers.set(body.request_id, offers);
        return { status: 200, body: { offers } };
      }
      case 'ack':
      case 'renew':
        return items(body.leases);
      case 'release':
        this.releases.push(...body.leases.filter((l: any) => !fenced(l.token)));
        return items(body.leases);
      case 'complete':
        this.completions.push(...body.completions.filter((c: any) => !fenced(c.token)));
        return items(body.completions);
      case 'logs':
        if (fenced(body.token)) return { status: 409, body: { error: 'lease expired or revoked' } };
        this.logs.set(body.step_id, [...(this.logs.get(body.step_id) ?? []), ...body.chunks]);
        return { status: 200, body: { ok: true } };
      default:
        return { status: 404, body: { error: 'not found' } };
    }
  }

  logText(stepId: number): string {
    return (this.logs.get(stepId) ?? []).map((c) => c.text).join('');
  }
}
