// POST /api/ops/partitions/{changeId}/cancel — cancel a partition count change before its switch, from any instance
// (SQL only); 409 once switched (it rolls forward). Thin: the handler in src/ validates and maps.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { cancelPartitionChangeHandler } from '../src/http/partitionCancel.js';

azf.app.http('cancelPartitionChange', {
  methods: ['POST'],
  route: 'ops/partitions/{changeId}/cancel',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => cancelPartitionChangeHandler(app)),
});
