// App lifecycle: on terminate, release the lease (a follower takes over within one tick instead of a
// lease duration) and close the pool.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import { closeCurrentApp } from '../src/app.js';

azf.app.hook.appTerminate(async () => {
  await closeCurrentApp();
});
