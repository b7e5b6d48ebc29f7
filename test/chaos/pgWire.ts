// Just enough of the PostgreSQL wire protocol (v3) for the chaos proxy to lose a reply after commit: frame the
// frontend and backend messages of one connection (1-byte type + int32 length; the startup message has no
// type), label each request unit — a simple Query ('Q'), or the extended-protocol messages up to their Sync
// ('S') — with the statement kind its SQL carries, and pair units with the backend's ReadyForQuery ('Z'), which
// the server sends once per unit, after the commit of an implicit transaction. A fenced transaction
// (BEGIN … COMMIT) is labelled at its COMMIT with the kind of the statements inside it.
// Anything unexpected (SSL, COPY) turns the connection opaque: bytes pass, nothing is trapped.

export const STATEMENT_KINDS = ['acquire', 'renew', 'start', 'complete', 'release', 'orphans'] as const;
export type StatementKind = (typeof STATEMENT_KINDS)[number];

// The `/* sm:<kind> */` markers in src/store/postgres first; the statements' own distinctive text as a fallback.
const PATTERNS: [StatementKind, RegExp][] = [
  ['acquire', /\/\* sm:acquire \*\/|INSERT INTO submission_manager_leases AS l/],
  ['renew', /\/\* sm:renew \*\/|UPDATE submission_manager_leases l\s+SET renewed_at = now\.t, expires_at/],
  ['release', /\/\* sm:release \*\/|'released', at FROM rel/],
  ['start', /\/\* sm:start \*\/|INSERT INTO submission_attempts \(intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome\)/],
  ['complete', /\/\* sm:complete \*\/|SET outcome = c\.outcome, finished_at = now\.t/],
  ['orphans', /\/\* sm:orphans \*\/|abandoned after a leader change/],
];

export function statementKind(sql: string): StatementKind | null {
  return PATTERNS.find(([, re]) => re.test(sql))?.[0] ?? null;
}

export interface Msg { type: string; body: Buffer; raw: Buffer }

/** Splits a byte stream into messages; `untyped` leading messages carry no type byte (startup). */
class Framer {
  private buf: Buffer = Buffer.alloc(0);
  constructor(public untyped: number) {}

  push(d: Buffer): Msg[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, d]) : d;
    const out: Msg[] = [];
    for (;;) {
      const head = this.untyped > 0 ? 0 : 1;
      if (this.buf.length < head + 4) break;
      const len = this.buf.readInt32BE(head);
      if (len < 4) throw new Error(`bad message length ${len}`);
      if (this.buf.length < head + len) break;
      const raw = this.buf.subarray(0, head + len);
      out.push({ type: head ? String.fromCharCode(raw[0]!) : '', body: raw.subarray(head + 4), raw });
      this.buf = this.buf.subarray(head + len);
      if (this.untyped > 0) this.untyped--;
    }
    return out;
  }

  /** Bytes received but not yet a whole message. */
  rest(): Buffer {
    const b = this.buf;
    this.buf = Buffer.alloc(0);
    return b;
  }
}

const cstring = (b: Buffer, at: number): [string, number] => {
  const end = b.indexOf(0, at);
  return [b.toString('utf8', at, end), end + 1];
};

/** Text-format columns of a DataRow (null for SQL NULL). */
export function dataRowColumns(body: Buffer): (string | null)[] {
  const n = body.readInt16BE(0);
  const cols: (string | null)[] = [];
  for (let i = 0, at = 2; i < n; i++) {
    const len = body.readInt32BE(at);
    at += 4;
    cols.push(len < 0 ? null : body.toString('utf8', at, at + len));
    if (len > 0) at += len;
  }
  return cols;
}

/** Did the unit's answer report the write the kind makes (so losing it loses a committed write)? */
export function wroteSomething(kind: StatementKind, answer: Msg[]): boolean {
  if (answer.some((m) => m.type === 'E')) return false;
  const rows = answer.filter((m) => m.type === 'D').map((m) => dataRowColumns(m.body));
  switch (kind) {
    case 'acquire': return rows[0]?.[0] === 't';
    case 'renew': return rows.length > 0;
    case 'release': return rows[0]?.[0] !== undefined && rows[0][0] !== '0';
    case 'start': return rows.some((r) => r[0] === '1' && r[1] !== null); // (fenced, intent_id of a started attempt, …)
    case 'complete': return rows[0]?.[0] === '1';
    case 'orphans': return answer.some((m) => m.type === 'C' && m.body.toString('utf8').startsWith('COMMIT'));
  }
}

/** One request unit and the backend messages answering it (kept only while a trap holds them). */
export interface Unit {
  /** The kind whose write this unit commits: its own statement (autocommit), or the transaction's at COMMIT. */
  commits: StatementKind | null;
  startup?: boolean;
  held: Msg[] | null;
  trap: unknown;
}

/** Per-connection protocol state. */
export class PgConversation {
  opaque = false;
  private readonly fe = new Framer(1);
  private readonly be = new Framer(0);
  private readonly waiting: Unit[] = [];
  private open: Unit | null = null;
  private openKind: StatementKind | null = null;
  private readonly named = new Map<string, StatementKind | null>();
  private unnamed: StatementKind | null = null;
  /** Inside BEGIN … COMMIT: the kind of its statements (null: none recognised), else undefined. */
  private tx: StatementKind | null | undefined = undefined;

  /** `onUnit` picks a trap (or none) for each finished request unit. */
  constructor(private readonly onUnit: (u: Unit) => void) {}

  /** Frontend bytes (already forwarded or about to be): label the request units. */
  fromClient(d: Buffer): void {
    if (this.opaque) return;
    try {
      for (const m of this.fe.push(d)) this.frontend(m);
    } catch {
      this.opaque = true;
    }
  }

  private frontend(m: Msg): void {
    if (m.type === '') {
      const code = m.body.length >= 4 ? m.body.readInt32BE(0) : 0;
      if (code !== 196_608) { // not protocol 3.0 (SSLRequest, GSSENCRequest, CancelRequest): do not inspect
        this.opaque = true;
        return;
      }
      this.finish({ commits: null, startup: true, held: null, trap: null });
      return;
    }
    switch (m.type) {
      case 'Q': {
        const [sql] = cstring(m.body, 0);
        this.finish({ commits: this.label(sql), held: null, trap: null });
        return;
      }
      case 'P': {
        const [name, at] = cstring(m.body, 0);
        const [sql] = cstring(m.body, at);
        const kind = statementKind(sql);
        if (name) this.named.set(name, kind);
        else this.unnamed = kind;
        this.openKind ??= kind;
        return;
      }
      case 'B': {
        const [, at] = cstring(m.body, 0);
        const [stmt] = cstring(m.body, at);
        this.openKind ??= stmt ? this.named.get(stmt) ?? null : this.unnamed;
        return;
      }
      case 'S': {
        const kind = this.openKind;
        this.openKind = null;
        this.finish({ commits: this.inTx(kind), held: null, trap: null });
        return;
      }
      case 'd': case 'c': case 'f': // COPY data from the client: not ours
        this.opaque = true;
        return;
      default:
        this.open ??= { commits: null, held: null, trap: null }; // D, E, H, C, p …: part of the open unit
    }
  }

  /** A simple query's label; BEGIN / COMMIT / ROLLBACK track the transaction. */
  private label(sql: string): StatementKind | null {
    const t = sql.trim().toUpperCase();
    if (t === 'BEGIN' || t.startsWith('BEGIN ') || t.startsWith('START TRANSACTION')) {
      this.tx = null;
      return null;
    }
    if (t === 'COMMIT' || t === 'END') {
      const kind = this.tx ?? null;
      this.tx = undefined;
      return kind;
    }
    if (t === 'ROLLBACK') {
      this.tx = undefined;
      return null;
    }
    return this.inTx(statementKind(sql));
  }

  /** Inside a transaction a statement commits nothing yet: its kind is the transaction's, for its COMMIT. */
  private inTx(kind: StatementKind | null): StatementKind | null {
    if (this.tx === undefined) return kind === 'orphans' ? null : kind; // orphan recovery commits only at COMMIT
    this.tx ??= kind;
    return null;
  }

  private finish(u: Unit): void {
    const unit = this.open ?? u;
    this.open = null;
    unit.commits = u.commits;
    unit.startup = u.startup;
    this.onUnit(unit);
    this.waiting.push(unit);
  }

  /** Backend bytes, in order: bytes to forward, and units whose held answer is complete (their ReadyForQuery
   *  arrived) for the caller to decide on before forwarding anything after them. */
  fromServer(d: Buffer): ServerPart[] {
    if (this.opaque) return [this.be.rest(), d].filter((b) => b.length > 0).map((b) => ({ bytes: b }));
    let msgs: Msg[];
    try {
      msgs = this.be.push(d);
    } catch {
      this.opaque = true;
      return [{ bytes: this.be.rest() }];
    }
    const out: ServerPart[] = [];
    for (const m of msgs) {
      const head = this.waiting[0] ?? this.open;
      if (head?.held) head.held.push(m);
      else out.push({ bytes: m.raw });
      if (m.type === 'Z' && this.waiting.length > 0) {
        const u = this.waiting.shift()!;
        if (u.held) out.push({ unit: u, answer: u.held });
        u.held = null;
      }
    }
    return out;
  }
}

export type ServerPart = { bytes: Buffer } | { unit: Unit; answer: Msg[] };
