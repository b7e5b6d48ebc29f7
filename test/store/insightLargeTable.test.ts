// The overview counts and the partition states cost what their work costs, not what the table of finished intents
// holds (ports: src/store/opsPorts.ts, src/store/insightPorts.ts), on every dialect: with 300 000 settled intents, an
// attempt each, the overview counts succeeded up to SETTLED_COUNT_CAP (and says so) while the open statuses stay
// exact, and the partition states read the newest PARTITION_ATTEMPT_SCAN attempts and their intents by primary key,
// never every intent. Judged by the database's own counters of rows examined (test/support/largeTable.ts).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import { SETTLED_COUNT_CAP } from '../../src/store/opsPorts.js';
import { PARTITION_ATTEMPT_SCAN } from '../../src/store/insightPorts.js';

const SETTLED = 300_000;

describe.each(dialects)('overview and partition states on a large table: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { put } = changeArrangement(() => s);

  it('count settled intents up to the cap and read the newest attempts by primary key, with 300 000 settled intents', async () => {
    if (!ctx.examined || !ctx.seedSettled) return expect(dialect.name).toBe('mssql'); // not written for SQL Server (no server here)
    const examined = ctx.examined;
    await ctx.seedSettled(SETTLED);
    await ctx.sql(`INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome)
      SELECT intent_id, 1, 1, 'seed', last_modified_at, last_modified_at, 'succeeded' FROM submission_intents WHERE status = 'succeeded'`);
    await ctx.sql(dialect.name === 'mysql' ? 'ANALYZE TABLE submission_attempts' : 'ANALYZE submission_attempts');
    for (let i = 0; i < 3; i++) await put({ partition: 0 });

    const o = await examined((x) => x.ops.getClusterOverview('insight-large'));
    expect(o.value.intentsByStatus).toEqual({ scheduled: 3, in_flight: 0, succeeded: SETTLED_COUNT_CAP, failed: 0, cancelled: 0 });
    expect(o.value.intentsCapped).toEqual(['succeeded']);
    // The capped range once (MySQL/MariaDB: once more from the derived table it fills), never every settled row.
    expect(o.rows, `the overview examined ${o.rows} rows`).toBeLessThanOrEqual(2 * SETTLED_COUNT_CAP + 20_000);

    const p = await examined((x) => x.insights.partitionStates([{ partition: 0, leaseName: 'insight-large' }]));
    expect(p.value.partitions).toHaveLength(1);
    expect(p.value.partitions[0]!.lastAttemptAt).toBeInstanceOf(Date);
    // The newest attempts and their intents' primary keys (MySQL/MariaDB: and the derived table it fills), not every intent.
    expect(p.rows, `the partition states examined ${p.rows} rows`).toBeLessThanOrEqual(5 * PARTITION_ATTEMPT_SCAN);
  });
});
