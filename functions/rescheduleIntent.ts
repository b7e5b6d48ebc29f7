// POST /api/intents/{id}/reschedule — thin: the handler in src/ validates and maps; this file only registers the route.
import azf from '@azure/functions';
import { httpHandler } from '../src/functionsHost.js';

azf.app.http('rescheduleIntent', {
  methods: ['POST'],
  route: 'intents/{id}/reschedule',
  authLevel: 'function',
  handler: httpHandler((app) => app.handlers.postReschedule),
});
