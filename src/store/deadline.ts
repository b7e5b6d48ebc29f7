// Client-side deadlines for database calls, shared by both drivers. The server-side statement timeout
// normally answers first; a connection that has not answered by the client-side deadline (statement timeout +
// margin) is presumed dead (blackholed network, frozen server) and destroyed by the caller's onTimeout, so a
// tick never waits for TCP to give up.
import { StoreError } from './ports.js';

/** `p`, or a transient StoreError (code CLIENT_DEADLINE) once `ms` have passed, after `onTimeout` ran.
 *  One promise and one timer per call; `p` settling after the deadline is ignored (never unhandled). */
export function withDeadline<T>(p: Promise<T>, ms: number, onTimeout: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      try {
        onTimeout();
      } finally {
        reject(new StoreError('transient', `no answer from the database within the client-side deadline (${ms} ms); connection destroyed`,
          'CLIENT_DEADLINE'));
      }
    }, ms);
    p.then((v) => {
      clearTimeout(timer);
      resolve(v);
    }, (e: unknown) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}
