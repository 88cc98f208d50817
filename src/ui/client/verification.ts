/**
 * Emoji verification (SAS) on matrix-js-sdk's Rust crypto, and what this device knows of other
 * users' identities (issue 38). One verification at a time: asked here (`requestVerificationDM` in a
 * room, or of this user's other devices) or of this device (`VerificationRequestReceived`). Whoever
 * asked starts the SAS once the other accepts; the other follows the start (`verifier.verify()`).
 */
import type { MatrixClient } from 'matrix-js-sdk';
import { CryptoEvent, VerificationPhase, VerificationRequestEvent, VerifierEvent, type ShowSasCallbacks, type VerificationRequest, type Verifier } from 'matrix-js-sdk/lib/crypto-api/index.js';
import type { DeviceInfo, UserTrust, Verification } from '../chat.ts';
import { chatCall } from './convert.ts';

const SAS = 'm.sas.v1';
/**
 * Verifications this page saw end, by transaction ID (for one in a room, its request's event ID): a
 * reload reads the room's recent events again, and the crypto takes their request for a new one.
 */
const FINISHED = 'hearth-finished-verifications';
const FINISHED_KEPT = 50;

export class Verifications {
  private request: VerificationRequest | undefined;
  private verifier: Verifier | undefined;
  private sas: ShowSasCallbacks | undefined;
  private confirmed = false;
  private starting = false;
  /** Cancelled from this page (the crypto names only the user who cancelled, the same for one's own devices). */
  private cancelledHere = false;
  private readonly trust = new Map<string, UserTrust>();
  private readonly fetching = new Set<string>();
  /** Asked again while a fetch was under way: what it reads may be from before the change. */
  private readonly fetchAgain = new Set<string>();

  constructor(
    private readonly client: MatrixClient,
    private readonly changed: () => void,
  ) {}

  /** The Rust crypto runs: follow verifications asked of this device, and identity changes. */
  attach(): void {
    this.client.on(CryptoEvent.VerificationRequestReceived, (request) => {
      // Its own request read back from the room, or one already over: nothing to ask of anyone.
      if (request.initiatedByMe || !request.pending || (request.transactionId && finished().includes(request.transactionId))) return;
      this.follow(request);
    });
    // Who is verified, and their devices, may have changed: fetch again what is shown.
    const refetch = (userIds: string[]) => {
      for (const userId of userIds) if (this.trust.has(userId)) void this.fetchTrust(userId);
    };
    this.client.on(CryptoEvent.UserTrustStatusChanged, (userId) => refetch([userId]));
    this.client.on(CryptoEvent.DevicesUpdated, (userIds) => refetch(userIds));
    this.client.on(CryptoEvent.KeysChanged, () => refetch([...this.trust.keys()]));
  }

  current(): Verification | undefined {
    const request = this.request;
    if (!request) return undefined;
    const base = { otherUserId: request.otherUserId, otherName: this.nameOf(request), ownDevice: request.isSelfVerification, otherDeviceId: request.otherDeviceId, emoji: [] as Verification['emoji'] };
    switch (request.phase) {
      case VerificationPhase.Unsent:
      case VerificationPhase.Requested:
        if (request.initiatedByMe) return { ...base, phase: 'waiting' };
        return { ...base, phase: request.accepting ? 'starting' : 'incoming' };
      case VerificationPhase.Ready:
        return { ...base, phase: 'starting' };
      case VerificationPhase.Started: {
        const emoji = (this.sas?.sas.emoji ?? []).map(([symbol, name]) => ({ symbol, name }));
        if (emoji.length === 0) return { ...base, phase: 'starting' };
        return { ...base, emoji, phase: this.confirmed ? 'confirmed' : 'compare' };
      }
      case VerificationPhase.Done:
        return { ...base, phase: 'done' };
      case VerificationPhase.Cancelled:
        return { ...base, phase: 'cancelled', cancelledBy: this.cancelledHere ? 'me' : 'them', cancelCode: request.cancellationCode ?? undefined };
    }
  }

  async requestUser(userId: string, roomId: string): Promise<void> {
    const crypto = this.cryptoApi();
    this.follow(await crypto.requestVerificationDM(userId, roomId));
  }

  async requestOwnDevices(): Promise<void> {
    const crypto = this.cryptoApi();
    this.follow(await crypto.requestOwnUserVerification());
  }

  accept(): void {
    const request = this.request;
    if (request?.phase === VerificationPhase.Requested && !request.initiatedByMe) void request.accept().catch((error) => this.failed(error));
  }

  cancel(): void {
    const request = this.request;
    if (!request || request.phase === VerificationPhase.Done || request.phase === VerificationPhase.Cancelled) return;
    this.cancelledHere = true;
    if (this.sas) this.sas.cancel();
    else void request.cancel().catch((error) => this.failed(error));
  }

  compare(match: boolean): void {
    const sas = this.sas;
    if (!sas || this.confirmed) return;
    if (match) {
      this.confirmed = true;
      this.changed();
      void sas.confirm().catch((error) => this.failed(error));
    } else {
      this.cancelledHere = true;
      sas.mismatch();
    }
  }

  dismiss(): void {
    const request = this.request;
    if (request && request.phase !== VerificationPhase.Done && request.phase !== VerificationPhase.Cancelled) return;
    this.reset(undefined);
    this.changed();
  }

  userTrust(userId: string): UserTrust | undefined {
    const known = this.trust.get(userId);
    if (!known && !this.fetching.has(userId)) void this.fetchTrust(userId);
    return known;
  }

  private async fetchTrust(userId: string): Promise<void> {
    const crypto = this.client.getCrypto();
    if (!crypto) return;
    if (this.fetching.has(userId)) return void this.fetchAgain.add(userId);
    this.fetching.add(userId);
    try {
      const status = await crypto.getUserVerificationStatus(userId);
      const devices = (await crypto.getUserDeviceInfo([userId], true)).get(userId) ?? new Map();
      const unverifiedDevices: DeviceInfo[] = [];
      for (const device of devices.values()) {
        const deviceStatus = await crypto.getDeviceVerificationStatus(userId, device.deviceId);
        if (!deviceStatus?.signedByOwner && !deviceStatus?.localVerified) unverifiedDevices.push({ deviceId: device.deviceId, displayName: device.displayName, verified: false });
      }
      const next: UserTrust = { verified: status.isVerified(), wasVerified: status.wasCrossSigningVerified(), unverifiedDevices };
      const before = this.trust.get(userId);
      this.trust.set(userId, next);
      if (JSON.stringify(before) !== JSON.stringify(next)) this.changed();
    } catch (error) {
      console.warn('hearth: could not read the identity of', userId, error);
    } finally {
      this.fetching.delete(userId);
      if (this.fetchAgain.delete(userId)) void this.fetchTrust(userId);
    }
  }

  private follow(request: VerificationRequest): void {
    const busy = this.request && this.request !== request && this.request.phase !== VerificationPhase.Done && this.request.phase !== VerificationPhase.Cancelled;
    // One at a time: a second request while one goes on is declined rather than shown over it.
    if (busy) return void request.cancel({ reason: 'Busy with another verification', code: 'm.user' }).catch(() => undefined);
    this.reset(request);
    request.on(VerificationRequestEvent.Change, () => this.onRequestChange(request));
    this.onRequestChange(request);
  }

  private reset(request: VerificationRequest | undefined): void {
    this.request = request;
    this.verifier = undefined;
    this.sas = undefined;
    this.confirmed = false;
    this.starting = false;
    this.cancelledHere = false;
  }

  private onRequestChange(request: VerificationRequest): void {
    if (request !== this.request) return;
    if (!request.pending && request.transactionId) remember(request.transactionId);
    // Another device of this user answered it before this one did: nothing for this one to show.
    if (request.phase === VerificationPhase.Cancelled && request.cancellationCode === 'm.accepted' && !request.initiatedByMe && !request.accepting && !this.verifier) {
      this.reset(undefined);
      return this.changed();
    }
    if (request.phase === VerificationPhase.Ready && request.initiatedByMe && !this.starting) {
      this.starting = true;
      void request.startVerification(SAS).then(
        (verifier) => this.run(request, verifier),
        (error) => this.failed(error),
      );
    }
    if (request.phase === VerificationPhase.Started && request.verifier) this.run(request, request.verifier);
    if (request.phase === VerificationPhase.Done) {
      // Now verified: what the members pane shows of them changes.
      void this.fetchTrust(request.otherUserId);
    }
    this.changed();
  }

  /** Follows the SAS: its emoji, and its end (`verify()` resolves when both sides confirmed). */
  private run(request: VerificationRequest, verifier: Verifier): void {
    if (request !== this.request || this.verifier === verifier) return;
    this.verifier = verifier;
    verifier.on(VerifierEvent.ShowSas, (sas) => {
      if (this.verifier !== verifier) return;
      this.sas = sas;
      this.changed();
    });
    verifier.on(VerifierEvent.Cancel, () => this.changed());
    void verifier.verify().then(
      () => void this.fetchTrust(request.otherUserId),
      () => this.changed(),
    );
  }

  private failed(error: unknown): void {
    console.warn('hearth: verification failed', error);
    this.changed();
  }

  private nameOf(request: VerificationRequest): string {
    const room = request.roomId ? this.client.getRoom(request.roomId) : undefined;
    return room?.getMember(request.otherUserId)?.name ?? request.otherUserId;
  }

  private cryptoApi() {
    const crypto = this.client.getCrypto();
    if (!crypto) throw new Error('encryption is not running in this page');
    return crypto;
  }
}

function finished(): string[] {
  try {
    const kept = JSON.parse(localStorage.getItem(FINISHED) ?? '[]') as unknown;
    return Array.isArray(kept) ? kept.filter((id): id is string => typeof id === 'string') : [];
  } catch {
    return [];
  }
}

function remember(transactionId: string): void {
  const kept = finished();
  if (kept.includes(transactionId)) return;
  localStorage.setItem(FINISHED, JSON.stringify([...kept, transactionId].slice(-FINISHED_KEPT)));
}

/** A user's devices, each verified or not by its owner's cross-signing (or by this user), in device ID order. */
export async function deviceList(client: MatrixClient, userId: string): Promise<DeviceInfo[]> {
  const crypto = client.getCrypto();
  if (!crypto) return [];
  const devices = (await chatCall(() => crypto.getUserDeviceInfo([userId], true))).get(userId) ?? new Map();
  const list: DeviceInfo[] = [];
  for (const device of devices.values()) {
    const status = await crypto.getDeviceVerificationStatus(userId, device.deviceId);
    list.push({ deviceId: device.deviceId, displayName: device.displayName, verified: !!status && (status.signedByOwner || status.isVerified()) });
  }
  return list.sort((a, b) => a.deviceId.localeCompare(b.deviceId));
}
