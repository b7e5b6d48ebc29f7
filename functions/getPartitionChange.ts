// GET /api/ops/partitions/{changeId} — one partition count change and its progress (404 problem when unknown).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { partitionChangeHandler } from '../src/http/partitions.js';

azf.app.http('getPartitionChange', {
  methods: ['GET'],
  route: 'ops/partitions/{changeId}',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => partitionChangeHandler(app)),
});
