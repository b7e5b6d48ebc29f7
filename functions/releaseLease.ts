// POST /api/ops/lease/release — request a leader drain (handover) from any instance: recorded in SQL, 202 with
// the request; the leader sees it within one schedule refresh, finishes and fences in-flight work, releases.
// Admin routes live under ops/: the Functions host rejects routes starting with admin/ (its own API), even under /api.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { releaseLeaseHandler } from '../src/http/ops.js';

azf.app.http('releaseLease', {
  methods: ['POST'],
  route: 'ops/lease/release',
  authLevel: 'admin',
  handler: httpHandler(getApp, (app) => releaseLeaseHandler(app)),
});
