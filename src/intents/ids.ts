// Intent ids: UUIDv7 (RFC 9562 §5.7). 48-bit Unix-millisecond timestamp, version 7, a 12-bit counter in
// rand_a (RFC 9562 §6.2 method 1), variant 0b10, 62 random bits in rand_b.
// Guarantees: ids from one process are strictly increasing (also within one millisecond and when the
// wall clock steps back), so `ORDER BY intent_id` is creation order per process and roughly across
// processes; 62 random bits per id make collisions between processes negligible.
import { randomBytes } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for the canonical 8-4-4-4-12 hex form (any version, either case). Anything else is never an id. */
export function isUuid(s: unknown): s is string {
  return typeof s === 'string' && UUID_RE.test(s);
}

let lastMs = -1;
let counter = 0;

/** A new UUIDv7, lower case. `now` is injectable for tests. */
export function uuidv7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    // Seed below 0x800 so a burst within one millisecond has ≥ 2048 increments before it must borrow.
    counter = randomBytes(2).readUInt16BE(0) & 0x7ff;
  } else if (counter < 0xfff) {
    counter += 1; // same millisecond (or clock went back): keep the last timestamp, bump the counter
  } else {
    lastMs += 1; // counter exhausted: borrow the next millisecond, keeps ids increasing
    counter = randomBytes(2).readUInt16BE(0) & 0x7ff;
  }
  const b = randomBytes(16);
  b.writeUIntBE(lastMs, 0, 6);
  b[6] = 0x70 | (counter >> 8);
  b[7] = counter & 0xff;
  b[8] = 0x80 | (b[8]! & 0x3f);
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}
