// GET /api/leases — every executor partition: lease row, holder, epoch, backlog, last attempt (from SQL).
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { leasesHandler } from '../src/http/leases.js';

azf.app.http('getLeases', {
  methods: ['GET'],
  route: 'leases',
  authLevel: 'function',
  handler: httpHandler(getApp, (app) => leasesHandler(app)),
});
