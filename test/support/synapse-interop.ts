/**
 * The interop fixture (interop.ts) with Synapse as the remote server: `synapseAndHearth()` names
 * its parts after Synapse (`synapse`, `onSynapse`) and takes Synapse's own options.
 */
import { remoteAndHearth, type RemoteAndHearth, type RemoteAndHearthOptions, type Side } from './interop.ts';
import { startSynapse, type SynapseServer } from './synapse.ts';

export * from './interop.ts';

export interface SynapseAndHearth extends RemoteAndHearth<SynapseServer> {
  synapse: SynapseServer;
  /** The first of `synapseUsers`, with a client without crypto. */
  onSynapse: Side;
}

export interface SynapseAndHearthOptions extends Omit<RemoteAndHearthOptions, 'remoteUsers'> {
  /** Who is registered on Synapse before the tests (default `sam`). */
  synapseUsers?: string[];
  /** Synapse's server name's host (default `localhost`, as Hearth's): `127.0.0.1` makes the two differ beyond their ports. */
  synapseHost?: 'localhost' | '127.0.0.1';
  /** Added to Synapse's config. */
  synapseConfig?: Record<string, unknown>;
}

/** Synapse and a Hearth host for the file's tests (see remoteAndHearth). */
export function synapseAndHearth(options: SynapseAndHearthOptions = {}): SynapseAndHearth {
  const { synapseUsers, synapseHost, synapseConfig, ...common } = options;
  const fixture = remoteAndHearth(
    (tls, port) => startSynapse({ tls, ...(synapseHost ? { host: synapseHost } : {}), ...(port ? { port } : {}), ...(synapseConfig ? { config: synapseConfig } : {}) }),
    { ...common, ...(synapseUsers ? { remoteUsers: synapseUsers } : {}) },
  );
  return Object.defineProperties(fixture, {
    synapse: { get: () => fixture.remote },
    onSynapse: { get: () => fixture.onRemote },
  }) as SynapseAndHearth;
}
