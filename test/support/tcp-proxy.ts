import { createServer, Socket, type Server } from 'node:net';

export type ProxyMode = 'pass' | 'blackhole' | 'refuse';

/**
 * A loopback TCP proxy in front of PostgreSQL that can pass traffic, blackhole it (accept and
 * hold connections, drop bytes both ways: a hung server), or refuse it (reset: a stopped one).
 */
export class TcpProxy {
  private server?: Server;
  private sockets = new Set<Socket>();
  mode: ProxyMode = 'pass';
  port = 0;

  constructor(private readonly targetHost: string, private readonly targetPort: number) {}

  async start(): Promise<number> {
    this.server = createServer((client) => {
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
      upstream.connect(this.targetPort, this.targetHost, () => {
        client.on('data', (d) => {
          if (this.mode === 'pass') upstream.write(d);
        });
        upstream.on('data', (d) => {
          if (this.mode === 'pass') client.write(d);
        });
      });
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    const addr = this.server.address();
    this.port = typeof addr === 'object' && addr ? addr.port : 0;
    return this.port;
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
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }
}
