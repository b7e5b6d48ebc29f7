// Listener locks as the Functions host keeps them: blob leases on AzureWebJobsStorage (locally Azurite), blob
// `locks/<hostId>/<lockId>` in container `azure-webjobs-hosts`, the holder named in the blob's
// `FunctionInstance` metadata. Through the Azure Storage SDK (@azure/storage-blob, a devDependency: only the
// local host needs it; in Azure the host itself holds these leases).
import type { BlobServiceClient, ContainerClient } from '@azure/storage-blob';
import { ConfigError } from '../config.js';
import type { ListenerLockStore } from './listenerLock.js';

export const HOSTS_CONTAINER = 'azure-webjobs-hosts';

/** Azurite's well-known development account (https://learn.microsoft.com/azure/storage/common/storage-use-azurite). */
export const AZURITE_ACCOUNT = 'devstoreaccount1';
export const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

/** A connection string for an Azurite blob endpoint on 127.0.0.1:`port`. */
export function azuriteConnectionString(port: number): string {
  return `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};BlobEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};`;
}

/** The blob endpoint of a connection string, without secrets (for the start banner). */
export function describeStorage(cs: string): string {
  if (/UseDevelopmentStorage=true/i.test(cs)) return 'Azurite http://127.0.0.1:10000 (UseDevelopmentStorage=true)';
  const ep = /BlobEndpoint=([^;]+)/i.exec(cs)?.[1];
  const account = /AccountName=([^;]+)/i.exec(cs)?.[1];
  return ep ? `blob endpoint ${ep}` : account ? `storage account ${account}` : 'AzureWebJobsStorage';
}

const statusOf = (e: unknown) => (e as { statusCode?: number }).statusCode;

export class BlobLockStore implements ListenerLockStore {
  readonly where: string;
  private constructor(private readonly container: ContainerClient, private readonly hostId: string, cs: string) {
    this.where = `blob leases in ${describeStorage(cs)}, container ${HOSTS_CONTAINER}, locks/${hostId}/`;
  }

  /** Connect and create the container (fails at start with a ConfigError naming AzureWebJobsStorage). */
  static async open(connectionString: string, hostId: string): Promise<BlobLockStore> {
    const { BlobServiceClient: Client } = await import('@azure/storage-blob');
    let svc: BlobServiceClient;
    try {
      svc = Client.fromConnectionString(connectionString, { retryOptions: { maxTries: 2, tryTimeoutInMs: 5_000 } });
    } catch (e) {
      throw new ConfigError(`AzureWebJobsStorage: not a usable storage connection string (${(e as Error).message})`);
    }
    const container = svc.getContainerClient(HOSTS_CONTAINER);
    try {
      await container.createIfNotExists();
    } catch (e) {
      const local = /UseDevelopmentStorage=true|127\.0\.0\.1|localhost/i.test(connectionString);
      throw new ConfigError(`AzureWebJobsStorage: ${describeStorage(connectionString)} is not reachable (${(e as Error).message.split('\n')[0]})` +
        (local ? '; start Azurite with `npm run azurite` (or unset AzureWebJobsStorage for in-process timer locks)' : ''));
    }
    return new BlobLockStore(container, hostId, connectionString);
  }

  private blob(lockId: string) {
    return this.container.getBlockBlobClient(`locks/${this.hostId}/${lockId}`);
  }

  async tryAcquire(lockId: string, owner: string, periodMs: number): Promise<string | null> {
    const blob = this.blob(lockId);
    const acquire = async () => {
      const r = await blob.getBlobLeaseClient().acquireLease(Math.round(periodMs / 1000));
      return r.leaseId ?? null;
    };
    let leaseId: string | null;
    try {
      leaseId = await acquire();
    } catch (e) {
      if (statusOf(e) === 409) return null;
      if (statusOf(e) !== 404) throw e;
      // First use: create the blob (a concurrent creator or a lease on it is fine), then try once more.
      try {
        await blob.upload('', 0, { conditions: { ifNoneMatch: '*' } });
      } catch (c) {
        if (statusOf(c) !== 409 && statusOf(c) !== 412) throw c;
      }
      try {
        leaseId = await acquire();
      } catch (e2) {
        if (statusOf(e2) === 409) return null;
        throw e2;
      }
    }
    if (!leaseId) return null;
    try {
      await blob.setMetadata({ FunctionInstance: owner }, { conditions: { leaseId } });
    } catch (e) {
      // Without the owner written we report a failure, so the lease must not sit unused for a whole period.
      await this.release(lockId, leaseId).catch(() => {}); // best effort: if this fails too, it runs out
      throw e;
    }
    return leaseId;
  }

  async renew(lockId: string, leaseId: string): Promise<'renewed' | 'lost'> {
    try {
      await this.blob(lockId).getBlobLeaseClient(leaseId).renewLease();
      return 'renewed';
    } catch (e) {
      const s = statusOf(e);
      if (s === 409 || s === 412 || s === 404) return 'lost'; // another lease (or the blob is gone)
      throw e;
    }
  }

  async release(lockId: string, leaseId: string): Promise<void> {
    try {
      await this.blob(lockId).getBlobLeaseClient(leaseId).releaseLease();
    } catch (e) {
      if (statusOf(e) !== 409 && statusOf(e) !== 404) throw e; // not ours any more: nothing to release
    }
  }

  async owner(lockId: string): Promise<string | null> {
    try {
      const p = await this.blob(lockId).getProperties();
      return p.leaseState === 'leased' ? (p.metadata?.functioninstance ?? p.metadata?.FunctionInstance ?? '') : null;
    } catch (e) {
      if (statusOf(e) === 404) return null;
      throw e;
    }
  }

  async close(): Promise<void> {}
}
