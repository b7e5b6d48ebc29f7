// POST /api/ops/partitions — request a change of the partition count {"count": N} from any instance: recorded in
// SQL (202 with the change); partition 0's changer drains every partition, switches the count and moves the rows.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { requestPartitionCountHandler } from '../src/http/partitions.js';

azf.app.http('postPartitions', {
  methods: ['POST'],
  route: 'ops/partitions',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => requestPartitionCountHandler(app)),
});
