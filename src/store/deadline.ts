// Client-side deadlines for database calls, shared by both drivers. The server-side statement timeout
// normally answers first; a connection that has not answered by the client-side deadline (statement timeout +
// margin) is presumed dead (blackholed network, frozen server) and destroyed by the caller's onTimeout, so a
// tick never waits for TCP to give up.
import { StoreError } from './ports.js';

/** How far above the server-side statement timeout the client-side deadline sits. */
export const CLIENT_DEADLINE_MARGIN_MS = 1_000;

/** `p`, or a transient StoreError (code CLIENT_DEADLINE) once `ms` have passed, after `onTimeout` ran. */
export async function withDeadline<T>(p: Promise<T>, ms: number, onTimeout: () => void): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  p.catch(() => {}); // its own error after the deadline (the destroyed connection) is not unhandled
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      try {
        onTimeout();
      } finally {
        reject(new StoreError('transient', `no answer from the database within the client-side deadline (${ms} ms); connection destroyed`,
          'CLIENT_DEADLINE'));
      }
    }, ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
