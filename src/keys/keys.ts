import type { Ed25519Backend } from '../crypto/ed25519.ts';
import type { Database } from '../storage/database.ts';
import type { StreamNotify } from '../storage/stream.ts';
import type { BackoffPolicy } from '../util/backoff.ts';
import { KeyBackup } from './backup.ts';
import { KeyChangeLog } from './change-log.ts';
import { KeyClaims } from './claim.ts';
import { CrossSigning } from './cross-signing.ts';
import { RemoteDeviceLists, type DeviceListSource } from './device-lists.ts';
import { KeyQueries } from './query.ts';
import { KeysSyncExtension } from './sync-extension.ts';
import { ToDevice, type ToDeviceOutbox } from './to-device.ts';
import type { KeysDirectory, KeysMembership } from './types.ts';
import { KeyUpload } from './upload.ts';

export { markRemoteListsStale } from './device-lists.ts';

export interface KeysOptions {
  db: Database;
  ed25519: Ed25519Backend;
  notify: StreamNotify;
  membership: KeysMembership;
  users: KeysDirectory;
  log?: (message: string, error?: unknown) => void;
  now?: () => number;
  deviceListBackoff?: BackoffPolicy;
  /** Federation's outbox for to-device messages to other servers' users (edus.ts, toDeviceOutbox). */
  toDeviceOutbox?: ToDeviceOutbox;
  /** Where other servers' device lists are fetched from (the federation client's `userDevices`). */
  deviceListSource?: DeviceListSource;
}

/**
 * End-to-end encryption on the server: device keys, one-time and fallback keys,
 * cross-signing keys and signatures, device list changes (for /sync, /keys/changes
 * and federation), to-device messages and key backup.
 *
 * The facade the rest of the server holds: each part lives in its own file (named
 * beside each group below) and its methods are offered here as they are. Keys is the
 * users component's DeviceListener and one of Sync's extensions.
 */
export class Keys {
  readonly toDevice: ToDevice;
  readonly backup: KeyBackup;
  /** Device lists of users on other servers, and their updater (device-lists.ts). */
  readonly remoteLists: RemoteDeviceLists;

  // upload.ts: POST /keys/upload, and the one-time key counts
  readonly upload: KeyUpload['upload'];
  readonly keyCounts: KeyUpload['keyCounts'];
  // query.ts: POST /keys/query, and GET /user/devices for other servers
  readonly query: KeyQueries['query'];
  readonly userDevices: KeyQueries['userDevices'];
  // claim.ts: POST /keys/claim
  readonly claim: KeyClaims['claim'];
  // cross-signing.ts: cross-signing keys and signatures
  readonly crossSigningUploadNeedsAuth: CrossSigning['crossSigningUploadNeedsAuth'];
  readonly uploadCrossSigningKeys: CrossSigning['uploadCrossSigningKeys'];
  readonly uploadSignatures: CrossSigning['uploadSignatures'];
  readonly onLocalSigningKeyChange: CrossSigning['onLocalSigningKeyChange'];
  // change-log.ts: the device-list change log, its outbound stream, the users DeviceListener
  readonly onLocalDeviceChange: KeyChangeLog['onLocalDeviceChange'];
  readonly deviceListUpdates: KeyChangeLog['deviceListUpdates'];
  readonly devicesAdded: KeyChangeLog['devicesAdded'];
  readonly devicesChanged: KeyChangeLog['devicesChanged'];
  readonly devicesRemoved: KeyChangeLog['devicesRemoved'];
  readonly devicesCommitted: KeyChangeLog['devicesCommitted'];
  // sync-extension.ts: what /sync (and /keys/changes) report
  readonly contribute: KeysSyncExtension['contribute'];
  readonly acknowledge: KeysSyncExtension['acknowledge'];
  readonly deviceListChanges: KeysSyncExtension['deviceListChanges'];

  constructor(options: KeysOptions) {
    const { db, notify, membership, users } = options;
    const log = options.log ?? (() => {});
    this.toDevice = new ToDevice(db, notify, users, options.toDeviceOutbox);
    this.backup = new KeyBackup(db);
    const changeLog = new KeyChangeLog({ db, notify, membership, users, log, deviceKeys: (userId, deviceId) => queries.deviceKeys(userId, deviceId) });
    this.remoteLists = new RemoteDeviceLists({
      db,
      isLocal: (userId) => users.isLocal(userId),
      remoteUsersSharingRooms: (server) => membership.remoteMembersSharingRooms(server),
      sharesRoom: (userId) => membership.sharesRoom(userId),
      recordChange: (tx, userId) => changeLog.record(tx, [{ userId, kind: 'device', audience: null }]),
      announce: (position, userId) => changeLog.announce(position, [{ userId, kind: 'device', audience: null }]),
      now: options.now ?? Date.now,
      log,
      backoff: options.deviceListBackoff,
      ...(options.deviceListSource ? { source: options.deviceListSource } : {}),
    });
    const uploads = new KeyUpload(db, changeLog);
    const queries = new KeyQueries(db, users, this.remoteLists);
    const claims = new KeyClaims(db, users);
    const crossSigning = new CrossSigning(db, options.ed25519, users, this.remoteLists, changeLog);
    const sync = new KeysSyncExtension(db, membership, this.toDevice, uploads);

    this.upload = uploads.upload.bind(uploads);
    this.keyCounts = uploads.keyCounts.bind(uploads);
    this.query = queries.query.bind(queries);
    this.userDevices = queries.userDevices.bind(queries);
    this.claim = claims.claim.bind(claims);
    this.crossSigningUploadNeedsAuth = crossSigning.crossSigningUploadNeedsAuth.bind(crossSigning);
    this.uploadCrossSigningKeys = crossSigning.uploadCrossSigningKeys.bind(crossSigning);
    this.uploadSignatures = crossSigning.uploadSignatures.bind(crossSigning);
    this.onLocalSigningKeyChange = crossSigning.onLocalSigningKeyChange.bind(crossSigning);
    this.onLocalDeviceChange = changeLog.onLocalDeviceChange.bind(changeLog);
    this.deviceListUpdates = changeLog.deviceListUpdates.bind(changeLog);
    this.devicesAdded = changeLog.devicesAdded.bind(changeLog);
    this.devicesChanged = changeLog.devicesChanged.bind(changeLog);
    this.devicesRemoved = changeLog.devicesRemoved.bind(changeLog);
    this.devicesCommitted = changeLog.devicesCommitted.bind(changeLog);
    this.contribute = sync.contribute.bind(sync);
    this.acknowledge = sync.acknowledge.bind(sync);
    this.deviceListChanges = sync.deviceListChanges.bind(sync);
  }
}
