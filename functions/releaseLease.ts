// POST /api/ops/lease/release — leader drain. A follower answers 409 not-leader (requests are load-balanced:
// callers retry until the leader answers); the leader stops starting, finishes in-flight attempts, releases.
// Admin routes live under ops/: the Functions host rejects routes starting with admin/ (its own API), even under /api.
import azf from '@azure/functions';
import { httpHandler } from '../src/functionsHost.js';
import { releaseLeaseHandler } from '../src/opsHandlers.js';

azf.app.http('releaseLease', {
  methods: ['POST'],
  route: 'ops/lease/release',
  authLevel: 'admin',
  handler: httpHandler((app) => releaseLeaseHandler(app)),
});
