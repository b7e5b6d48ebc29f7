// Partition assignment (issue 25): the executor partition of an intent, decided once at insert and stored with it.
// The rule, here (issue 26 re-hashes with it when the count changes; its preparing pass computes the same rule in
// SQL, set-based, in each dialect's partitionReassign: pinned to this one by the contract tests for keys of every
// UTF-8 width):
//   partition = (first 4 bytes of SHA-256(UTF-8 of the key), unsigned big-endian) mod count,
//   key = the submit's partitionKey, else the intent id (canonical lower-case UUID text).
// Guarantees: a pure function of (key, count), so the same on every process, release and dialect; intents sharing a
// partitionKey share a partition (one executor, in due order); with one partition every intent is partition 0.
// Why SHA-256 and not FNV-1a: FNV-1a's low k bits depend only on the low k bits of each input byte, so with a
// power-of-two count keys that differ elsewhere ('tenant-A', 'tenant-E') always share a partition; every bit of a
// SHA-256 digest depends on every input bit. SHA-256 is also in every SQL dialect and language (sha256(), SHA2(),
// HASHBYTES), so the rule can be checked outside the app. About a microsecond per submit.
import { hash } from 'node:crypto';

/** The 32-bit hash of a partition key: the first 4 bytes of its SHA-256 digest (UTF-8), unsigned big-endian. */
export function partitionHash(key: string): number {
  return Number.parseInt(hash('sha256', key, 'hex').slice(0, 8), 16);
}

/** The partition of `key` among `count` partitions (0..count−1). */
export function partitionOf(key: string, count: number): number {
  if (!Number.isInteger(count) || count < 1) throw new RangeError(`partition count must be a positive integer, got ${count}`);
  return partitionHash(key) % count;
}

/** The partition an intent gets at insert: by its partitionKey when it has one, else by its id. */
export function assignPartition(intent: { intentId: string; partitionKey: string | null }, count: number): number {
  return partitionOf(intent.partitionKey ?? intent.intentId.toLowerCase(), count);
}
