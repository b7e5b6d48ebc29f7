// GET /api/leases/{partition} — one executor partition, for fencing checks (400 not an integer, 404 out of range).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { partitionLeaseHandler } from '../src/http/leases.js';

azf.app.http('getPartitionLease', {
  methods: ['GET'],
  route: 'leases/{partition}',
  authLevel: 'function',
  handler: httpHandler(getApp, (app) => partitionLeaseHandler(app)),
});
