// A TCP proxy (node:net) between one instance and PostgreSQL, for network faults on that instance only:
//   drop(ms)             reset every open connection and refuse (reset) new ones for `ms`;
//   blackhole(ms, end)   stop forwarding in both directions (sockets stay open, bytes wait in the kernel
//                        buffers; new connections are held), then either `resume` (the delayed bytes are
//                        delivered late) or `reset` (every held connection is reset).
import net from 'node:net';

type Mode = 'pass' | 'drop' | 'blackhole';

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
}

export class TcpProxy {
  private mode: Mode = 'pass';
  private readonly pairs = new Set<Pair>();
  private readonly server: net.Server;
  port = 0;

  constructor(private readonly targetHost: string, private readonly targetPort: number) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this.port;
  }

  get connections(): number {
    return this.pairs.size;
  }

  private accept(client: net.Socket): void {
    client.on('error', () => {});
    if (this.mode === 'drop') {
      client.resetAndDestroy();
      return;
    }
    const pair: Pair = { client, upstream: null };
    this.pairs.add(pair);
    client.on('close', () => {
      pair.upstream?.destroy();
      this.pairs.delete(pair);
    });
    if (this.mode === 'blackhole') client.pause(); // connected later, on resume
    else this.connectUpstream(pair);
  }

  private connectUpstream(pair: Pair): void {
    const up = net.connect(this.targetPort, this.targetHost);
    pair.upstream = up;
    up.on('error', () => pair.client.destroy());
    up.on('close', () => pair.client.destroy());
    const forward = (from: net.Socket, to: net.Socket) => from.on('data', (d: Buffer) => {
      if (this.mode === 'blackhole') {
        from.pause();
        from.unshift(d); // held, delivered on resume
        return;
      }
      if (!to.write(d)) {
        from.pause();
        to.once('drain', () => this.mode === 'pass' && from.resume());
      }
    });
    forward(pair.client, up);
    forward(up, pair.client);
    pair.client.resume();
  }

  /** Reset every connection now and refuse new ones for `ms`. */
  async drop(ms: number): Promise<void> {
    this.mode = 'drop';
    this.resetAll();
    await new Promise((r) => setTimeout(r, ms));
    this.mode = 'pass';
  }

  /** Forward nothing for `ms`, then resume (late delivery) or reset everything that was held. */
  async blackhole(ms: number, end: 'resume' | 'reset'): Promise<void> {
    this.mode = 'blackhole';
    for (const p of this.pairs) {
      p.client.pause();
      p.upstream?.pause();
    }
    await new Promise((r) => setTimeout(r, ms));
    if (end === 'reset') this.resetAll();
    this.mode = 'pass';
    if (end === 'resume') {
      for (const p of this.pairs) {
        if (p.upstream) {
          p.client.resume();
          p.upstream.resume();
        } else {
          this.connectUpstream(p);
        }
      }
    }
  }

  private resetAll(): void {
    for (const p of [...this.pairs]) {
      p.upstream?.resetAndDestroy();
      p.client.resetAndDestroy();
      this.pairs.delete(p);
    }
  }

  async close(): Promise<void> {
    this.resetAll();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
