// One release number everywhere: package.json's version moves by semver past the previous release's
// (test/support/previousRelease.json), CHANGELOG.md opens with it, and the code reports that one value — the
// instances registry's version, the OpenAPI document's info.version, the metrics meter's version.
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { API_VERSION, buildOpenApiDocument } from '../../src/http/openapi/document.js';
import { MetricsRegistry } from '../../src/observability/metrics.js';
import { appVersion } from '../../src/version.js';

const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const previous = JSON.parse(readFileSync('test/support/previousRelease.json', 'utf8')) as { version: string; commit: string };

describe('the release number', () => {
  it('is a semver version past the previous release, which names a full commit id', () => {
    expect(semver.valid(version)).toBe(version);
    expect(semver.gt(version, previous.version), `${version} > ${previous.version}`).toBe(true);
    expect(previous.commit).toMatch(/^[0-9a-f]{40}$/);
  });

  it('CHANGELOG.md opens with this release and keeps the previous one', () => {
    const headings = [...readFileSync('CHANGELOG.md', 'utf8').matchAll(/^## (\S+)/gm)].map((m) => m[1]);
    expect(headings[0]).toBe(version);
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
