// Partition assignment (src/intents/partition.ts): the rule is pinned by known values, so a change of the hash, of
// its byte order or of the text encoding fails here (stored partitions would silently disagree with new ones).
import { describe, expect, it } from 'vitest';
import { assignPartition, partitionHash, partitionOf } from '../../src/intents/partition.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionLeaseName, partitionLeaseNames, partitionSuffixLength } from '../../src/limits.js';
import { normaliseSubmit, requestHash } from '../../src/intents/contract.js';

// key → first 4 bytes of SHA-256(UTF-8 key) as an unsigned big-endian integer, and its partition for 2, 3, 4, 7, 16, 64.
// Checked against PostgreSQL (('x' || left(encode(sha256(convert_to(k, 'UTF8')), 'hex'), 8))::bit(32)::bigint) and
// MariaDB (CONV(LEFT(SHA2(k, 256), 8), 16, 10)) for 'tenant-A', 'ключ' and 'tenant-😀'.
const PINNED: [string, number, number[]][] = [
  ['a', 0xca978112, [0, 2, 2, 2, 2, 18]],
  ['tenant-A', 0xb2076c68, [0, 1, 0, 0, 8, 40]],
  ['tenant-E', 0x0c985efb, [1, 2, 3, 5, 11, 59]],
  ['customer-42', 0xa045eb33, [1, 2, 3, 1, 3, 51]],
  ['ключ', 0x1de36a32, [0, 1, 2, 5, 2, 50]],
  ['tenant-😀', 0x73aad52b, [1, 1, 3, 6, 11, 43]],
  ['0190f0e0-0000-7000-8000-000000000000', 0x246f6570, [0, 0, 0, 4, 0, 48]],
];
const COUNTS = [2, 3, 4, 7, 16, 64];

describe('partition assignment', () => {
  it.each(PINNED)('%j hashes to a pinned value and pinned partitions', (key, h, partitions) => {
    expect(partitionHash(key)).toBe(h);
    expect(COUNTS.map((n) => partitionOf(key, n))).toEqual(partitions);
  });

  it('one partition: every key and every id is partition 0', () => {
    for (const [key] of PINNED) expect(partitionOf(key, 1)).toBe(0);
    for (let i = 0; i < 200; i++) expect(assignPartition({ intentId: uuidv7(), partitionKey: null }, 1)).toBe(0);
  });

  it('the same key gets the same partition, whatever the intent id', () => {
    const got = new Set(Array.from({ length: 50 }, () => assignPartition({ intentId: uuidv7(), partitionKey: 'customer-42' }, 7)));
    expect([...got]).toEqual([partitionOf('customer-42', 7)]);
  });

  it('without a key the intent id decides, as lower-case text', () => {
    const id = '0190F0E0-0000-7000-8000-000000000000';
    expect(assignPartition({ intentId: id, partitionKey: null }, 64)).toBe(48);
    expect(assignPartition({ intentId: id.toLowerCase(), partitionKey: null }, 64)).toBe(48);
  });

  it('keys that differ only in high bits of a byte still spread (FNV-1a would put these four in one partition of 4)', () => {
    expect(new Set(['tenant-A', 'tenant-E', 'tenant-I', 'tenant-M'].map((k) => partitionOf(k, 4))).size).toBeGreaterThan(1);
  });

  it('ids spread evenly: 4 000 new ids over 4 partitions, each within 20 % of its share', () => {
    const n = [0, 0, 0, 0];
    for (let i = 0; i < 4_000; i++) n[assignPartition({ intentId: uuidv7(), partitionKey: null }, 4)]! += 1;
    for (const x of n) expect(Math.abs(x - 1_000)).toBeLessThan(200);
  });

  it.each([0, -1, 1.5, Number.NaN])('a count of %d is refused', (count) => {
    expect(() => partitionOf('k', count)).toThrow(RangeError);
  });
});

describe('partitionKey in the request hash (idempotent replay)', () => {
  const body = { payload: { order: 42, note: 'ü' }, maxAttempts: 3 };
  it('a submit without a partitionKey hashes exactly as before the field existed (stored hashes stay valid)', () => {
    expect(requestHash(normaliseSubmit(body, 5))).toBe('8004fab75192fe3d5dbdc12a87d39542f06ce7ce6e8aa09159c0505f7edc125a');
  });
  it('the key is part of the request: another key, or a key against none, is another request', () => {
    const h = (partitionKey?: string) => requestHash(normaliseSubmit(partitionKey === undefined ? body : { ...body, partitionKey }, 5));
    expect(new Set([h(), h('a'), h('A'), h('a ')]).size).toBe(4);
    expect(h('a')).toBe(h('a'));
  });
});

describe('partition lease names (issue 25)', () => {
  it('partition 0 keeps LEASE_NAME (one partition is today\'s lease row); partition k is LEASE_NAME#k', () => {
    expect(partitionLeaseName('submission-manager-executor', 0)).toBe('submission-manager-executor');
    expect(partitionLeaseName('submission-manager-executor', 3)).toBe('submission-manager-executor#3');
    expect(partitionLeaseNames('L', 3)).toEqual(['L', 'L#1', 'L#2']);
    expect(partitionSuffixLength(1)).toBe(0);
    expect(partitionSuffixLength(10)).toBe(2);
    expect(partitionSuffixLength(11)).toBe(3);
    expect(() => partitionLeaseName('L', -1)).toThrow(RangeError);
  });
});
