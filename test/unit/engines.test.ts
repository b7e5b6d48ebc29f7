// The Node versions package.json declares are honest: every production dependency in the lock file accepts
// the lowest declared version (a dependency that needs more must be pinned or overridden), and the running
// Node is one the project declares.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { IN_CI } from '../support/pgServer.js';
import { projectRoot } from '../support/projectRoot.js';

interface LockEntry { dev?: boolean; devOptional?: boolean; engines?: Record<string, string> | string[] | string; version?: string }
const root = projectRoot(import.meta.url);
const pkg = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };

/** The lock's production packages with a node engines range (older lock entries may give engines as an array). */
function productionNodeRanges(packages: Record<string, LockEntry>): { name: string; version: string; range: string }[] {
  return Object.entries(packages).flatMap(([p, m]) => {
    if (p === '' || m.dev || m.devOptional) return [];
    const range = typeof m.engines === 'object' && !Array.isArray(m.engines) ? m.engines.node : undefined;
    return range ? [{ name: p.replace(/^.*node_modules\//, ''), version: m.version ?? '?', range }] : [];
  });
}

/** Dependencies whose engines range excludes `nodeVersion`. */
function excluding(nodeVersion: string, packages: Record<string, LockEntry>): string[] {
  return productionNodeRanges(packages)
    .filter((d) => !semver.satisfies(nodeVersion, d.range, { includePrerelease: true }))
    .map((d) => `${d.name}@${d.version} (engines.node "${d.range}")`);
}

describe('engines', () => {
  const lowest = semver.minVersion(pkg.engines.node)!.version;

  it('package.json declares a Node range starting at 22 (the Flex Consumption runtime)', () => {
    expect(semver.valid(lowest)).toBeTruthy();
    expect(semver.major(lowest)).toBeGreaterThanOrEqual(22);
  });

  it(`every production dependency in the lock file accepts the lowest declared Node`, () => {
    expect(productionNodeRanges(lock.packages).length).toBeGreaterThan(50); // the lock was really read
    expect(excluding(lowest, lock.packages)).toEqual([]);
  });

  it('the check catches a dependency that needs more than the lowest declared Node', () => {
    const fake = { '': {}, 'node_modules/needs-24': { version: '1.0.0', engines: { node: '>=24' } },
      'node_modules/dev-only': { version: '1.0.0', dev: true, engines: { node: '>=99' } } };
    expect(excluding(lowest, fake)).toEqual(['needs-24@1.0.0 (engines.node ">=24")']);
  });

  // CI must run on a declared version (.ci/run brings Node 22); a developer's other Node only gets npm's EBADENGINE warning.
  it.runIf(IN_CI)('CI runs the suite on a declared Node version', () => {
    expect(semver.satisfies(process.versions.node, pkg.engines.node), `node ${process.versions.node} vs engines ${pkg.engines.node}`).toBe(true);
  });
});
