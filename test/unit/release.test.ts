// One release number everywhere: package.json's version moves by semver past the previous release's
// (test/support/previousRelease.json), CHANGELOG.md opens with it, and the code reports that one value — the
// instances registry's version, the OpenAPI document's info.version, the metrics meter's version.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { API_VERSION, buildOpenApiDocument } from '../../src/http/openapi/document.js';
import { MetricsRegistry } from '../../src/observability/metrics.js';
import { appVersion, COUNT_CHANGE_MIN_VERSION, isOlderRelease } from '../../src/version.js';
import { ROOT } from '../support/localHostProcess.js';
import { requireCommit } from '../support/previousRelease.js';

const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const previous = JSON.parse(readFileSync('test/support/previousRelease.json', 'utf8')) as { version: string; commit: string };

describe('the release number', () => {
  it('is a semver version past the previous release, which names a full commit id', () => {
    expect(semver.valid(version)).toBe(version);
    expect(semver.gt(version, previous.version), `${version} > ${previous.version}`).toBe(true);
    expect(previous.commit).toMatch(/^[0-9a-f]{40}$/);
  });

  it('the previous release\'s commit is in this clone; a clone without it says why (shallow, or not fetched)', () => {
    expect(() => requireCommit(ROOT, previous.version, previous.commit)).not.toThrow();
    expect(() => requireCommit(ROOT, previous.version, '0'.repeat(40))).toThrow(/is not in this clone's history — fetch it, or correct the file$/);
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sm-shallow-'));
    try {
      const clone = spawnSync('git', ['clone', '-q', '--depth', '1', `file://${ROOT}`, dir], { encoding: 'utf8' });
      expect(clone.status, clone.stderr).toBe(0);
      expect(() => requireCommit(dir, previous.version, previous.commit)).toThrow(/a shallow clone: `git fetch --unshallow`/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('CHANGELOG.md opens with this release (after an Unreleased section, if any) and keeps the previous one', () => {
    const headings = [...readFileSync('CHANGELOG.md', 'utf8').matchAll(/^## (\S+)/gm)].map((m) => m[1]);
    expect(headings.indexOf('Unreleased')).toBeLessThanOrEqual(0);
    expect(headings.filter((h) => h !== 'Unreleased')[0]).toBe(version);
    expect(headings).toContain(previous.version);
  });

  it('is what the registry row, the OpenAPI document and the metrics meter report', async () => {
    expect(appVersion()).toBe(version);
    expect(loadConfig({}).instances.version).toBe(version);
    expect(API_VERSION).toBe(version);
    expect((buildOpenApiDocument() as { info: { version: string } }).info.version).toBe(version);
    const reg = MetricsRegistry.standalone();
    reg.forInstance('v').intentSubmitted('created');
    const { resourceMetrics } = await reg.reader.collect();
    expect(resourceMetrics.scopeMetrics.map((s) => [s.scope.name, s.scope.version])).toEqual([['submission-manager', version]]);
    await reg.shutdown();
  });
});

describe('isOlderRelease (the count change\'s guard)', () => {
  it.each([
    ['0.1.0', '0.2.0', true], ['0.2.0', '0.2.0', false], ['0.3.0', '0.2.0', false], ['0.10.0', '0.2.0', false], ['0.2.1', '0.2.0', false],
    ['1.0.0', '0.2.0', false], ['0.1.99', '0.2.0', true], ['0.2.0-rc.1', '0.2.0', true], ['0.2.0-rc.2', '0.2.0-rc.10', true],
    ['0.2.0-rc.1', '0.2.0-beta', false], ['0.2.0-1', '0.2.0-alpha', true], ['0.2.0+build.5', '0.2.0', false],
    ['unknown', '0.2.0', true], ['', '0.2.0', true], ['v0.2.0', '0.2.0', true],
  ])('%s older than %s: %s', (v, than, older) => {
    expect(isOlderRelease(v, than)).toBe(older);
    if (semver.valid(v) === v) expect(semver.lt(v, than)).toBe(older); // the same order as the semver package
  });

  it('the minimum is a release at most this one (this release may change the count)', () => {
    expect(isOlderRelease(version, COUNT_CHANGE_MIN_VERSION)).toBe(false);
  });
});
