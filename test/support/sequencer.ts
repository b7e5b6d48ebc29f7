// The order vitest starts the test files in (vitest.config.ts, `sequence.sequencer`): the slowest first, so that with
// two workers the files still running at the end are short ones and both workers finish together (vitest's own order
// uses the timings of a previous run, which a fresh clone has not: it then starts the larger files first, and a small
// file of long waits could start late and run alone at the end).
// SLOW gives each listed file's seconds in a whole run on two cores (the Duration vitest prints per file); the files
// not listed come after, the system tests (processes, waits) first, then the rest, larger files first within each.
// Only the order matters: refresh the figures when a file's time changes much.
import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

const SLOW: Record<string, number> = {
  'test/system/partitionChange.test.ts': 81,
  'test/system/timerSingleton.test.ts': 75,
  'test/system/clusterLimits.test.ts': 68,
  'test/system/processes.test.ts': 61,
  'test/system/maintenance.test.ts': 51,
  'test/system/providerGuard.test.ts': 50,
  'test/system/partitionProcesses.test.ts': 48,
  'test/system/clusterGuard.test.ts': 47,
  'test/system/pagedReconcile.test.ts': 38,
  'test/system/partitionCapacity.test.ts': 35,
  'test/system/tickHandoff.test.ts': 33,
  'test/system/partitionChangeLarge.test.ts': 32,
  'test/store/clientDeadline.test.ts': 31,
};

export default class SlowestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const key = (f: TestSpecification) => {
      const path = relative(this.ctx.config.root, f.moduleId).split('\\').join('/');
      const size = (() => { try { return statSync(f.moduleId).size; } catch { return 0; } })();
      // [group, -weight]: listed files by their seconds, then system tests, then the rest, by size.
      return SLOW[path] !== undefined ? [0, -SLOW[path]!] : [path.startsWith('test/system/') ? 1 : 2, -size];
    };
    const keyed = files.map((f) => ({ f, k: key(f) }));
    keyed.sort((a, b) => a.k[0]! - b.k[0]! || a.k[1]! - b.k[1]!);
    return keyed.map((x) => x.f);
  }
}
