// Numbered migrations, applied in order, each once (see ../migrate.ts). Never edit a released one: add a new one.
import { m001Initial } from './m001Initial.js';
import { m002Operations } from './m002Operations.js';
import { m003MaintenanceState } from './m003MaintenanceState.js';
import { m004Partitions } from './m004Partitions.js';
import { m005PartitionIndexes } from './m005PartitionIndexes.js';
import { m006Instances } from './m006Instances.js';
import { m007ProviderHolds } from './m007ProviderHolds.js';
import { m008PartitionChanges } from './m008PartitionChanges.js';
import { m009LayoutGeneration } from './m009LayoutGeneration.js';
import { m010LargeTableChange } from './m010LargeTableChange.js';
import { m011ChangeReports } from './m011ChangeReports.js';
import { m012ReleaseGuard } from './m012ReleaseGuard.js';
import { m013StatusIndex } from './m013StatusIndex.js';
import { m014PrepareGuard } from './m014PrepareGuard.js';
import type { Migration } from '../../sqlScript.js';

export type { Migration } from '../../sqlScript.js';

export const migrations: readonly Migration[] = [
  { id: 1, name: 'initial', sql: m001Initial },
  { id: 2, name: 'operations', sql: m002Operations },
  { id: 3, name: 'maintenance_state', sql: m003MaintenanceState },
  { id: 4, name: 'partitions', sql: m004Partitions },
  { id: 5, name: 'partition_indexes', sql: m005PartitionIndexes },
  { id: 6, name: 'instances', sql: m006Instances },
  { id: 7, name: 'provider_holds', sql: m007ProviderHolds },
  { id: 8, name: 'partition_changes', sql: m008PartitionChanges },
  { id: 9, name: 'layout_generation', sql: m009LayoutGeneration },
  { id: 10, name: 'large_table_change', sql: m010LargeTableChange },
  { id: 11, name: 'change_reports', sql: m011ChangeReports },
  { id: 12, name: 'release_guard', sql: m012ReleaseGuard },
  { id: 13, name: 'status_index', sql: m013StatusIndex },
  { id: 14, name: 'prepare_guard', sql: m014PrepareGuard },
];
