// A TCP proxy (node:net) between one instance and PostgreSQL, for network faults on that instance only:
//   drop(ms)             reset every open connection and refuse (reset) new ones for `ms`;
//   blackhole(ms, end)   stop forwarding in both directions (sockets stay open, bytes wait in the kernel
//                        buffers; new connections are held), then either `resume` (the delayed bytes are
//                        delivered late) or `reset` (every held connection is reset);
//   arm(trap)            lose a reply after commit: the first request unit committing the trap's statement kind
//                        is forwarded, the server's whole answer is dropped once it shows the write was made, and
//                        the client connection is reset, or held silent until the client gives up (pgWire.ts).
import net from 'node:net';
import { PgConversation, wroteSomething, type Msg, type StatementKind, type Unit } from './pgWire.js';

type Mode = 'pass' | 'drop' | 'blackhole';

/** Bytes forwarded as they come, never parsed (a protocol the traps do not speak). */
const RAW_WIRE: Pick<PgConversation, 'fromClient' | 'fromServer'> = { fromClient: () => {}, fromServer: (d) => [{ bytes: d }] };

interface Pair {
  client: net.Socket;
  upstream: net.Socket | null;
  conv: Pick<PgConversation, 'fromClient' | 'fromServer'>;
  /** A reply was lost on this connection: nothing more is forwarded either way (it ends reset or by the client). */
  lost: boolean;
}

/** How a connection whose reply was lost ends: reset at once, or held silent until the client's own deadline. */
export type LossEnd = 'reset' | 'hold';

export interface LostReply { kind: StatementKind; end: LossEnd; proxy: TcpProxy; at: number; endedAt: number }

/** One-shot, shareable by several proxies: the first committed write of `kind` loses its answer. */
export class ReplyTrap {
  fired: { proxy: TcpProxy; at: number } | null = null;
  private resolve!: (r: LostReply) => void;
  /** Resolves once the reply was lost and the connection ended (reset, or the client closed the held one). */
  readonly done = new Promise<LostReply>((r) => (this.resolve = r));

  /** `holdMaxMs`: a held connection the client never closes is reset after this long. */
  constructor(readonly kind: StatementKind, readonly end: LossEnd, readonly holdMaxMs = 15_000) {}

  /** @internal the proxy reports the loss and, later, the connection's end. */
  fire(proxy: TcpProxy): void {
    this.fired = { proxy, at: Date.now() };
  }

  ended(): void {
    this.resolve({ kind: this.kind, end: this.end, proxy: this.fired!.proxy, at: this.fired!.at, endedAt: Date.now() });
  }
}

export class TcpProxy {
  private mode: Mode = 'pass';
  private readonly pairs = new Set<Pair>();
  private readonly server: net.Server;
  private readonly traps = new Set<ReplyTrap>();
  port = 0;

  /** `wire`: 'postgres' parses the conversation (reply traps need it); 'raw' forwards bytes unread (MySQL). */
  constructor(private readonly targetHost: string, private readonly targetPort: number, private readonly wire: 'postgres' | 'raw' = 'postgres') {
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
    client.setNoDelay(true); // as the drivers do: no reply part waits for the peer's delayed ACK (≈ 40 ms)
    if (this.mode === 'drop') {
      client.resetAndDestroy();
      return;
    }
    const conv = this.wire === 'raw' ? RAW_WIRE : new PgConversation((u) => this.trapUnit(u));
    const pair: Pair = { client, upstream: null, conv, lost: false };
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
    up.setNoDelay(true);
    pair.upstream = up;
    up.on('error', () => pair.client.destroy());
    up.on('close', () => pair.client.destroy());
    const send = (from: net.Socket, to: net.Socket, chunks: Buffer[]) => {
      // One write per forwarded read: a reply cut into parts (the parsed conversation) goes out whole.
      if (chunks.length === 0) return;
      const ok = to.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      if (!ok) {
        from.pause();
        to.once('drain', () => this.mode === 'pass' && from.resume());
      }
    };
    const held = (from: net.Socket, d: Buffer) => {
      if (this.mode !== 'blackhole') return false;
      from.pause();
      from.unshift(d); // held, delivered on resume
      return true;
    };
    pair.client.on('data', (d: Buffer) => {
      if (pair.lost || held(pair.client, d)) return;
      pair.conv.fromClient(d);
      send(pair.client, up, [d]);
    });
    up.on('data', (d: Buffer) => {
      if (pair.lost || held(up, d)) return;
      const out: Buffer[] = [];
      for (const part of pair.conv.fromServer(d)) {
        if ('bytes' in part) out.push(part.bytes);
        else if (this.loseAnswer(pair, part.unit, part.answer)) break;
        else out.push(...part.answer.map((m) => m.raw));
      }
      if (!pair.lost) send(up, pair.client, out);
    });
    pair.client.resume();
  }

  /** Arm a trap (it stays armed until it fires or is disarmed). */
  arm(trap: ReplyTrap): void {
    this.traps.add(trap);
  }

  disarm(trap: ReplyTrap): void {
    this.traps.delete(trap);
  }

  /** A finished request unit: hold its answer when an armed trap waits for its kind. */
  private trapUnit(u: Unit): void {
    if (!u.commits) return;
    const trap = [...this.traps].find((t) => t.kind === u.commits && !t.fired);
    if (!trap) return;
    u.trap = trap;
    u.held = [];
  }

  /** The held answer is complete: if it reports the write, the write committed — drop the answer and end the
   *  connection as the trap says (true); otherwise let it through (false) and stay armed. */
  private loseAnswer(pair: Pair, unit: Unit, answer: Msg[]): boolean {
    const trap = unit.trap as ReplyTrap;
    if (trap.fired || !wroteSomething(trap.kind, answer)) return false;
    trap.fire(this);
    this.traps.delete(trap);
    pair.lost = true;
    if (trap.end === 'reset') {
      pair.upstream?.resetAndDestroy();
      pair.client.resetAndDestroy();
      this.pairs.delete(pair);
      trap.ended();
      return true;
    }
    // Held: both sockets keep flowing into nothing, so the client's close is seen; reset if it never comes.
    const timer = setTimeout(() => pair.client.resetAndDestroy(), trap.holdMaxMs);
    pair.client.once('close', () => {
      clearTimeout(timer);
      trap.ended();
    });
    return true;
  }

  /** Reset every connection now and refuse new ones for `ms`. */
  async drop(ms: number): Promise<void> {
    this.mode = 'drop';
    this.resetAll();
    await new Promise((r) => setTimeout(r, ms));
    this.mode = 'pass';
  }

  /** Forward nothing for `ms`, then resume (late delivery) or reset everything that was held. */
  blackhole(ms: number, end: 'resume' | 'reset'): Promise<void> {
    return this.holdUntil(new Promise((r) => setTimeout(r, ms)), end);
  }

  /** Forward nothing until `until` resolves, then resume or reset (blackhole of a length decided meanwhile). */
  async holdUntil(until: Promise<unknown>, end: 'resume' | 'reset'): Promise<void> {
    this.mode = 'blackhole';
    for (const p of this.pairs) {
      p.client.pause();
      p.upstream?.pause();
    }
    await until;
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
