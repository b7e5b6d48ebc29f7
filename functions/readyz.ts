// GET /api/readyz — role info (mode=leader|follower holder_id=… lease_epoch=… lease_expires_at=…); 200 for both.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { getApp } from '../src/app.js';
import { httpHandler } from '../src/http/functionsHost.js';
import { readyz } from '../src/http/health.js';

azf.app.http('readyz', {
  methods: ['GET'],
  route: 'readyz',
  authLevel: 'anonymous',
  handler: httpHandler(getApp, (app) => readyz(app)),
});
