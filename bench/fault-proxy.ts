import { createServer, Socket, type Server } from 'node:net';

export type ProxyMode = 'pass' | 'blackhole' | 'refuse';

const REQUEST_LINE = /^[A-Z]+ (\S+) HTTP\/1\.[01]\r\n/;
/** How much of a request's start drop rules look at. */
const HEAD_BYTES = 4096;

/**
 * A loopback TCP proxy that injects faults between a client and a server. It passes traffic,
 * blackholes it (accepts and holds connections, drops bytes both ways: a hung server), or refuses
 * it (resets: a stopped one). In front of an HTTP server it can also lose a reply after the
 * server acted on the request: the next request whose path matches is forwarded, and when the
 * server's answer starts to come back it is dropped and the client's connection cut, so the client
 * sees a reset and must retry a call that already committed.
 *
 * Used by the tests (store outages) and by `npm run chaos` (store hung or refused, replies lost).
 */
export class FaultProxy {
  private server?: Server;
  private sockets = new Set<Socket>();
  private dropRules: Array<{ path: RegExp; body?: RegExp; resolve: (path: string) => void }> = [];
  private rawDropRules: Array<{ bytes: RegExp; resolve: (what: string) => void }> = [];
  mode: ProxyMode = 'pass';
  port = 0;
  /** Replies dropped so far, by request path. */
  readonly dropped: string[] = [];

  constructor(private targetHost: string, private targetPort: number) {}

  async start(port = 0): Promise<number> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      this.server!.once('error', reject);
      this.server!.listen(port, '127.0.0.1', () => resolve());
    });
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this.port;
  }

  /** Points new connections at another port (a server restarted elsewhere). */
  retarget(port: number, host = this.targetHost): void {
    this.targetPort = port;
    this.targetHost = host;
  }

  private accept(client: Socket): void {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => {});
    if (this.mode === 'refuse') return void client.destroy();
    if (this.mode === 'blackhole') return void client.on('data', () => {});
    const upstream = new Socket();
    this.sockets.add(upstream);
    upstream.on('close', () => this.sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    // Set when a request on this connection matched a drop rule: its answer never reaches the client.
    let dropping: string | undefined;
    // The start of the request now on this connection (its line, headers and the first of its body),
    // which a rule's path and body patterns are matched against as it arrives.
    let head = '';
    upstream.connect(this.targetPort, this.targetHost, () => {
      client.on('data', (d) => {
        if (this.mode !== 'pass') return;
        if (this.rawDropRules.length > 0 && dropping === undefined) {
          const text = d.toString('latin1');
          const i = this.rawDropRules.findIndex((r) => r.bytes.test(text));
          if (i >= 0) {
            const [rule] = this.rawDropRules.splice(i, 1);
            dropping = rule.bytes.source;
            rule.resolve(dropping);
          }
        }
        if (this.dropRules.length > 0 && dropping === undefined) {
          const text = d.toString('latin1', 0, Math.min(d.length, HEAD_BYTES));
          if (REQUEST_LINE.test(text)) head = text;
          else if (head.length < HEAD_BYTES) head += text;
          const m = head.match(REQUEST_LINE);
          const i = m ? this.dropRules.findIndex((r) => r.path.test(m[1]) && (!r.body || r.body.test(head))) : -1;
          if (i >= 0) {
            dropping = m![1];
            const [rule] = this.dropRules.splice(i, 1);
            rule.resolve(dropping);
          }
        }
        upstream.write(d);
      });
      upstream.on('data', (d) => {
        if (dropping !== undefined) {
          // The server answered: whatever it did is committed. The client never hears of it.
          this.dropped.push(dropping);
          client.destroy();
          upstream.destroy();
          return;
        }
        if (this.mode === 'pass') client.write(d);
      });
    });
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  }

  /**
   * Loses the reply to the next request whose path matches (and whose start, body included,
   * matches `body` when given). Resolves with the path once a request matched (its reply is then
   * dropped when it comes).
   */
  dropNextReply(path: RegExp, body?: RegExp): Promise<string> {
    return new Promise((resolve) => this.dropRules.push({ path, body, resolve }));
  }

  /**
   * Loses the reply to the next client message whose bytes match, whatever the protocol: in front
   * of PostgreSQL, a statement runs (and, outside a transaction, commits) but its client hears only
   * that the connection broke, so the outcome is unknown to it.
   */
  dropNextReplyTo(bytes: RegExp): Promise<string> {
    return new Promise((resolve) => this.rawDropRules.push({ bytes, resolve }));
  }

  /** Forgets drop rules that never matched. */
  clearDrops(): void {
    this.dropRules = [];
    this.rawDropRules = [];
  }

  /** Existing connections hang too: bytes are dropped from now on. */
  blackhole(): void {
    this.mode = 'blackhole';
  }

  /** Every existing connection is cut and new ones are reset, as when the server stops. */
  refuse(): void {
    this.mode = 'refuse';
    for (const s of this.sockets) s.destroy();
  }

  /** Back to passing; hung connections are cut so clients reconnect. */
  heal(): void {
    const hung = this.mode === 'blackhole';
    this.mode = 'pass';
    if (hung) for (const s of this.sockets) s.destroy();
  }

  async stop(): Promise<void> {
    this.clearDrops();
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
