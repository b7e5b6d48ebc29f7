// The release this build is: package.json's `version`, the one source for what the instances registry records,
// /api/healthz and the dashboard show, the OpenAPI document's info.version and the metrics meter's version.
// May import: nothing of ours (a leaf).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** package.json's `version` (the first package.json above this file: src/ under the tests, dist/src/ when built, the
 *  deployed package on Azure), or `unknown` when none is readable. Read once. */
let version: string | null = null;
export function appVersion(): string {
  if (version !== null) return version;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4 && version === null; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version?: unknown };
      version = typeof pkg.version === 'string' ? pkg.version.slice(0, 64) : 'unknown';
    } catch {
      // no package.json here: one folder up
    }
  }
  return (version ??= 'unknown');
}

/** The first release whose every instance keeps a count change safe: its intake takes the switch's exclusion (MySQL/
 *  MariaDB and SQL Server lock the count row's share at insert), its changer raises the layout generation and writes
 *  the release guards (release_changer, switched_by, the prepare copies) that the database requires of a change this
 *  release requested — an earlier changer's claim, switch and preparing batch are refused there. A count change
 *  starts (and is cancelled) only while no live instance runs an older one (409 naming them), and waits for them
 *  before its leases and its switch. Every build before 0.2.0 reported 0.1.0, whatever code it ran. */
export const COUNT_CHANGE_MIN_VERSION = '0.3.0';

/** `version` is older than `than` by semver precedence (major.minor.patch numerically; a pre-release such as 0.2.0-rc.1
 *  is below its release). A version that is not x.y.z[-pre] (e.g. `unknown`) counts as older: nothing vouches for it. */
export function isOlderRelease(version: string, than: string): boolean {
  const parse = (v: string) => /^(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$/.exec(v.trim());
  const a = parse(version);
  const b = parse(than);
  if (!b) throw new RangeError(`not a release version: ${than}`);
  if (!a) return true;
  for (let i = 1; i <= 3; i++) {
    const d = Number(a[i]) - Number(b[i]);
    if (d !== 0) return d < 0;
  }
  return a[4] !== undefined && (b[4] === undefined || comparePre(a[4], b[4]) < 0);
}

/** Pre-release precedence (semver 11.4): dot-separated identifiers, numeric ones numerically and below text ones. */
function comparePre(a: string, b: string): number {
  const x = a.split('.');
  const y = b.split('.');
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const [p, q] = [x[i]!, y[i]!];
    if (p === q) continue;
    const [pn, qn] = [/^\d+$/.test(p), /^\d+$/.test(q)];
    if (pn && qn) return Number(p) - Number(q);
    if (pn !== qn) return pn ? -1 : 1;
    return p < q ? -1 : 1;
  }
  return x.length - y.length;
}
