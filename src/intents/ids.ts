// Intent ids: UUIDv7 (RFC 9562 §5.7). 48-bit Unix-millisecond timestamp, version 7, a 12-bit counter in
// rand_a (RFC 9562 §6.2 method 1), variant 0b10, 62 random bits in rand_b.
// Guarantees: ids from one process are strictly increasing (also within one millisecond and when the
// wall clock steps back), so `ORDER BY intent_id` is creation order per process and roughly across
// processes; 62 random bits per id make collisions between processes negligible.
import { randomFillSync } from 'node:crypto';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** True for the canonical 8-4-4-4-12 hex form (any version, either case). Anything else is never an id. */
export function isUuid(s: unknown): s is string {
  return typeof s === 'string' && UUID_RE.test(s);
}

let lastMs = -1;
let counter = 0;

// Random bytes are drawn from the CSPRNG in 4 KiB refills (one syscall-backed fill per 256 ids), not per id;
// each byte is used once.
const POOL = Buffer.allocUnsafe(4096);
let poolAt = POOL.length;
function take(n: number): number {
  if (poolAt + n > POOL.length) {
    randomFillSync(POOL);
    poolAt = 0;
  }
  const at = poolAt;
  poolAt += n;
  return at;
}
const seed = () => {
  const at = take(2);
  return ((POOL[at]! << 8) | POOL[at + 1]!) & 0x7ff;
};
const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** A new UUIDv7, lower case. `now` is injectable for tests. */
export function uuidv7(now: number = Date.now()): string {
  if (now > lastMs) {
    lastMs = now;
    // Seed below 0x800 so a burst within one millisecond has ≥ 2048 increments before it must borrow.
    counter = seed();
  } else if (counter < 0xfff) {
    counter += 1; // same millisecond (or clock went back): keep the last timestamp, bump the counter
  } else {
    lastMs += 1; // counter exhausted: borrow the next millisecond, keeps ids increasing
    counter = seed();
  }
  const r = take(8); // rand_b: 62 random bits (the top two bits of its first byte become the variant)
  const t = lastMs;
  const hi = Math.floor(t / 0x1000000); // top 24 bits of the 48-bit timestamp
  const lo = t % 0x1000000;
  const x = (i: number) => HEX[POOL[r + i]!]!;
  return `${HEX[(hi >> 16) & 0xff]}${HEX[(hi >> 8) & 0xff]}${HEX[hi & 0xff]}${HEX[(lo >> 16) & 0xff]}-${HEX[(lo >> 8) & 0xff]}${HEX[lo & 0xff]}`
    + `-${HEX[0x70 | (counter >> 8)]}${HEX[counter & 0xff]}-${HEX[0x80 | (POOL[r]! & 0x3f)]}${x(1)}-${x(2)}${x(3)}${x(4)}${x(5)}${x(6)}${x(7)}`;
}
