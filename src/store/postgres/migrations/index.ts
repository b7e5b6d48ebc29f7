// Numbered migrations, applied in order, each once (see migrate.ts). Never edit a released one: add a new one.
import { m001Initial } from './m001Initial.js';
import { m002Operations } from './m002Operations.js';
import { m003Operate } from './m003Operate.js';
import { m004Redrive } from './m004Redrive.js';
import { m005Handover } from './m005Handover.js';
import { m006ScheduledIndex } from './m006ScheduledIndex.js';
import { m007ProviderState } from './m007ProviderState.js';
import { m008MaintenanceState } from './m008MaintenanceState.js';
import { m009Partitions } from './m009Partitions.js';
import { m010PartitionIndexes } from './m010PartitionIndexes.js';
import { m011Instances } from './m011Instances.js';
import { m012ProviderHolds } from './m012ProviderHolds.js';
import { m013PartitionChanges } from './m013PartitionChanges.js';
import { m014LayoutGeneration } from './m014LayoutGeneration.js';
import { m015LargeTableChange } from './m015LargeTableChange.js';
import { m016ChangeReports } from './m016ChangeReports.js';
import { m017FailedIndex } from './m017FailedIndex.js';
import { m018ReleaseGuard } from './m018ReleaseGuard.js';
import { m019StatusIndex } from './m019StatusIndex.js';
import { m020PrepareGuard } from './m020PrepareGuard.js';

import type { Migration } from '../../sqlScript.js';

export type { Migration } from '../../sqlScript.js';

export const migrations: readonly Migration[] = [
  { id: 1, name: 'initial', sql: m001Initial },
  { id: 2, name: 'operations', sql: m002Operations },
  { id: 3, name: 'operate', sql: m003Operate },
  { id: 4, name: 'redrive', sql: m004Redrive },
  { id: 5, name: 'handover', sql: m005Handover },
  { id: 6, name: 'scheduled_index', sql: m006ScheduledIndex },
  { id: 7, name: 'provider_state', sql: m007ProviderState },
  { id: 8, name: 'maintenance_state', sql: m008MaintenanceState },
  { id: 9, name: 'partitions', sql: m009Partitions },
  { id: 10, name: 'partition_indexes', sql: m010PartitionIndexes },
  { id: 11, name: 'instances', sql: m011Instances },
  { id: 12, name: 'provider_holds', sql: m012ProviderHolds },
  { id: 13, name: 'partition_changes', sql: m013PartitionChanges },
  { id: 14, name: 'layout_generation', sql: m014LayoutGeneration },
  { id: 15, name: 'large_table_change', sql: m015LargeTableChange },
  { id: 16, name: 'change_reports', sql: m016ChangeReports },
  { id: 17, name: 'failed_index', sql: m017FailedIndex },
  { id: 18, name: 'release_guard', sql: m018ReleaseGuard },
  { id: 19, name: 'status_index', sql: m019StatusIndex },
  { id: 20, name: 'prepare_guard', sql: m020PrepareGuard },
];
