// POST /api/intents/{id}/cancel — thin: the handler in src/ validates and maps; this file only registers the route.
import azf from '@azure/functions';
import { httpHandler } from '../src/functionsHost.js';

azf.app.http('cancelIntent', {
  methods: ['POST'],
  route: 'intents/{id}/cancel',
  authLevel: 'function',
  handler: httpHandler((app) => app.handlers.postCancel),
});
