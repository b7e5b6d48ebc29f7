// GET /api/ops/partitions — the recorded partition count, the change in progress, recent changes, partition leases.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { partitionLayoutHandler } from '../src/http/partitions.js';

azf.app.http('getPartitions', {
  methods: ['GET'],
  route: 'ops/partitions',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => partitionLayoutHandler(app)),
});
