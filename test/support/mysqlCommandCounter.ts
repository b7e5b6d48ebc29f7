// A TCP proxy (node:net) in front of a MySQL / MariaDB server that reads the client's side of the wire and
// records every command the client sends (a packet whose sequence id is 0: each starts one request/response
// exchange, i.e. one round trip). COM_QUERY texts are kept, so a test can say which statements travelled together.
// A trap (loseReplyTo) lets a command reach the server and drops its reply: the connection is cut when the server's
// first answer arrives (the server has run the first statement: committed, under autocommit), the client never sees it.
import net from 'node:net';

const COM_QUERY = 0x03;

export interface MysqlCommand {
  /** The command byte (0x03 COM_QUERY, 0x0e COM_PING, …). */
  command: number;
  /** The statement text of a COM_QUERY ('' otherwise). */
  text: string;
}

export class MysqlCommandCounter {
  readonly commands: MysqlCommand[] = [];
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private trap: { pattern: RegExp; sprung: () => void } | null = null;
  port = 0;

  constructor(private readonly targetHost: string, private readonly targetPort: number) {
    this.server = net.createServer((client) => this.accept(client));
  }

  async listen(): Promise<number> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as net.AddressInfo).port;
    return this.port;
  }

  /** The commands recorded while `fn` ran. */
  async during<T>(fn: () => Promise<T>): Promise<{ value: T; commands: MysqlCommand[] }> {
    const from = this.commands.length;
    const value = await fn();
    return { value, commands: this.commands.slice(from) };
  }

  /** The next COM_QUERY whose text matches `pattern` reaches the server, its reply is dropped and the connection cut;
   *  resolves then. */
  loseReplyTo(pattern: RegExp): Promise<void> {
    return new Promise((sprung) => (this.trap = { pattern, sprung }));
  }

  private accept(client: net.Socket): void {
    const up = net.connect(this.targetPort, this.targetHost);
    for (const s of [client, up]) {
      this.sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        this.sockets.delete(s);
        client.destroy();
        up.destroy();
      });
    }
    let pending = Buffer.alloc(0);
    let trapped: (() => void) | null = null; // a trapped command is on its way: cut at the server's first answer
    client.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      // Packets: 3-byte little-endian payload length, 1-byte sequence id, payload.
      while (pending.length >= 4) {
        const len = pending.readUIntLE(0, 3);
        if (pending.length < 4 + len) break;
        const seq = pending[3]!;
        const payload = pending.subarray(4, 4 + len);
        if (seq === 0 && len > 0) {
          const text = payload[0] === COM_QUERY ? payload.subarray(1).toString('utf8') : '';
          this.commands.push({ command: payload[0]!, text });
          if (this.trap?.pattern.test(text)) {
            trapped = this.trap.sprung;
            this.trap = null;
          }
        }
        pending = pending.subarray(4 + len);
      }
      up.write(d);
    });
    up.on('data', (d: Buffer) => {
      if (!trapped) return void client.write(d);
      client.destroy();
      up.destroy();
      trapped();
    });
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}
