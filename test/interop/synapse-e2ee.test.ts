import { CrossSigningKey, CryptoEvent, VerificationPhase, VerificationRequestEvent, VerifierEvent, type ShowSasCallbacks, type VerificationRequest } from 'matrix-js-sdk/lib/crypto-api/index.js';
import { beforeAll, describe, expect, it } from 'vitest';
import { api, type Account } from '../integration/harness.ts';
import { decryptedBodies, knownDevices, sdk, until } from '../integration/sdk.ts';
import { PASSWORD, synapseAndHearth, type InteropServer } from '../support/synapse-interop.ts';

// End-to-end encryption between a Hearth host and Synapse beyond a DM (issue 35, item 4), with
// Rust crypto in every client: group rooms of three people across both servers (one made on
// each), a device added and a device deleted on the other server (the next message's room key
// goes to the new set of devices, as the sender's client learns it from its own server's
// device lists), and cross-signing: each server shows the other's user's cross-signing keys and
// self-signed device, and after an emoji (SAS) verification over to-device messages between the
// servers, each server holds its user's signature of the other's master key and each client
// trusts the other. Key backup stays on one's own server, so there is nothing of it to test here.

const servers = synapseAndHearth({ synapseUsers: ['sam', 'sid'], hearthUsers: ['hana', 'hugo'] });

interface Request {
  method: string;
  url: string;
  body?: string;
}

/** A person at a device of their own, with a Rust-crypto client whose requests are recorded. */
interface Person {
  label: string;
  server: InteropServer;
  account: Account;
  client: sdk.MatrixClient;
  requests: Request[];
}

async function signIn(server: InteropServer, username: string): Promise<Person> {
  const account = await servers.login(server, username);
  const requests: Request[] = [];
  const recording: typeof fetch = async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    requests.push({ method: init?.method ?? 'GET', url, ...(typeof init?.body === 'string' ? { body: init.body } : {}) });
    return server.fetch(input, init);
  };
  const client = await servers.client(server, account, true, recording);
  return { label: `${username} on ${server === servers.synapse ? 'Synapse' : 'Hearth'}`, server, account, client, requests };
}

let sam: Person;
let sid: Person;
let hana: Person;
let hugo: Person;

beforeAll(async () => {
  [sam, sid, hana, hugo] = await Promise.all([signIn(servers.synapse, 'sam'), signIn(servers.synapse, 'sid'), signIn(servers.hearth, 'hana'), signIn(servers.hearth, 'hugo')]);
});

/** An encrypted private room made by `creator`, whom every one of `members` (on either server) has joined, each join seen by everyone. */
async function encryptedGroup(creator: Person, members: Person[]): Promise<string> {
  const { room_id: roomId } = await creator.client.createRoom({
    preset: sdk.Preset.PrivateChat,
    invite: members.map((m) => m.account.userId),
    initial_state: [{ type: 'm.room.encryption', state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } }],
  });
  for (const member of members) {
    await until(member.client, () => member.client.getRoom(roomId)?.getMyMembership() === 'invite', `the invite on ${member.label}`);
    await member.client.joinRoom(roomId);
  }
  for (const someone of [creator, ...members]) {
    await until(someone.client, () => [creator, ...members].every((m) => someone.client.getRoom(roomId)?.getMember(m.account.userId)?.membership === 'join'), `everyone joined, on ${someone.label}`);
  }
  return roomId;
}

/** The Megolm session an encrypted event of the client's timeline was sent with. */
const sessionOf = (client: sdk.MatrixClient, roomId: string, eventId: string): string | undefined => client.getRoom(roomId)?.findEventById(eventId)?.getWireContent()['session_id'];

/** The devices of `userId` that `sender`'s room keys went to (to-device `m.room.encrypted`) among its requests since `from`. */
function keyRecipients(sender: Person, from: number, userId: string): string[] {
  return sender.requests.slice(from)
    .filter((r) => r.method === 'PUT' && r.url.includes('/sendToDevice/m.room.encrypted/') && r.body)
    .flatMap((r) => Object.keys((JSON.parse(r.body!) as { messages: Record<string, object> }).messages[userId] ?? {}))
    .sort();
}

/** User-interactive auth with the password, for uploads that need it (a second bootstrap; a device deletion). */
const uia = (account: Account) => async (makeRequest: (auth: Record<string, unknown> | null) => Promise<unknown>) => {
  try {
    await makeRequest(null);
  } catch (error) {
    const e = error as { httpStatus?: number; data?: { session?: string } };
    if (e.httpStatus !== 401) throw error;
    await makeRequest({ type: 'm.login.password', identifier: { type: 'm.id.user', user: account.userId }, password: PASSWORD, session: e.data?.session });
  }
};

describe.each([
  { direction: 'made on Hearth (hana, hugo; sam from Synapse)', creator: () => hana, local: () => hugo, remote: () => sam },
  { direction: 'made on Synapse (sam, sid; hana from Hearth)', creator: () => sam, local: () => sid, remote: () => hana },
])('a group room $direction', ({ creator: creatorOf, local: localOf, remote: remoteOf }) => {
  let roomId: string;
  let creator: Person;
  /** A member on the creator's server. */
  let local: Person;
  /** A member on the other server. */
  let remote: Person;

  beforeAll(async () => {
    [creator, local, remote] = [creatorOf(), localOf(), remoteOf()];
    roomId = await encryptedGroup(creator, [local, remote]);
  }, 90_000);

  it('every member’s message decrypts for the other two', async () => {
    for (const sender of [creator, local, remote]) {
      const text = `a group secret from ${sender.label}`;
      await sender.client.sendTextMessage(roomId, text);
      for (const reader of [creator, local, remote].filter((p) => p !== sender)) {
        await until(reader.client, () => decryptedBodies(reader.client, roomId).includes(text), `${text}, decrypted by ${reader.label}`);
      }
    }
  }, 90_000);

  it('a device added on the other server gets the next message’s key; once deleted, the next message’s key is not sent to it', async () => {
    const second = await signIn(remote.server, remote.account.userId.slice(1).split(':')[0]!);
    // The creator's client learns of the device from its own server's /sync (device_lists.changed), not from a query of the test's.
    await until(creator.client, async () => (await knownDevices(creator.client, remote.account.userId)).includes(second.account.deviceId), `${creator.label} learning the new device`);
    const { event_id: toNewSet } = await creator.client.sendTextMessage(roomId, 'for the new set of devices');
    await until(second.client, () => decryptedBodies(second.client, roomId).includes('for the new set of devices'), 'the message decrypted on the new device');
    await until(remote.client, () => decryptedBodies(remote.client, roomId).includes('for the new set of devices'), 'the message decrypted on the first device');

    // The second device is deleted (with the password); its client stops.
    await uia(remote.account)((auth) => remote.client.deleteDevice(second.account.deviceId, (auth ?? undefined) as never));
    second.client.stopClient();
    await until(creator.client, async () => !(await knownDevices(creator.client, remote.account.userId)).includes(second.account.deviceId), `${creator.label} forgetting the deleted device`);

    // A device gone from the room's set makes the sender's client start a new Megolm session, whose key goes to the devices left.
    const from = creator.requests.length;
    const { event_id: afterDeletion } = await creator.client.sendTextMessage(roomId, 'after the deletion');
    await until(remote.client, () => decryptedBodies(remote.client, roomId).includes('after the deletion'), 'the message after the deletion, decrypted by the remaining device');
    await until(local.client, () => decryptedBodies(local.client, roomId).includes('after the deletion'), `the message after the deletion, decrypted by ${local.label}`);
    await until(creator.client, () => !!sessionOf(creator.client, roomId, afterDeletion), 'the sent event in the timeline');
    expect(sessionOf(creator.client, roomId, afterDeletion)).not.toBe(sessionOf(creator.client, roomId, toNewSet));
    expect(keyRecipients(creator, from, remote.account.userId)).toEqual([remote.account.deviceId]);
  }, 90_000);
});

describe('cross-signing between the servers', () => {
  it('each user bootstraps cross-signing; the other server shows their keys and their device signed by them', async () => {
    for (const person of [sam, hana]) {
      await person.client.getCrypto()!.bootstrapCrossSigning({ authUploadDeviceSigningKeys: uia(person.account) as never });
      await until(person.client, async () => (await person.client.getCrypto()!.getDeviceVerificationStatus(person.account.userId, person.account.deviceId))?.crossSigningVerified === true, `${person.label}'s own device cross-signed`);
    }
    for (const [watcher, owner] of [[hana, sam], [sam, hana]] as const) {
      // The owner's signature reaches the watcher's server as a device-list update, some time after the upload: ask at each of its client's syncs.
      const query = async () => (await api(watcher.server, 'POST', '/_matrix/client/v3/keys/query', { token: watcher.account.accessToken, body: { device_keys: { [owner.account.userId]: [] } }, unchecked: true })).body;
      const selfSigningKeyIdIn = (body: any) => Object.keys(body.self_signing_keys?.[owner.account.userId]?.keys ?? {})[0];
      const signedBySelfSigning = (body: any) => body.device_keys?.[owner.account.userId]?.[owner.account.deviceId]?.signatures?.[owner.account.userId]?.[selfSigningKeyIdIn(body) ?? ''] !== undefined;
      await until(watcher.client, async () => signedBySelfSigning(await query()), `${owner.label}'s device signed by their self-signing key on ${watcher.label}'s server`);
      const seen = await query();
      expect(seen.master_keys?.[owner.account.userId]?.usage, `${owner.label}'s master key on ${watcher.label}'s server`).toEqual(['master']);
      expect(selfSigningKeyIdIn(seen), `${owner.label}'s self-signing key on ${watcher.label}'s server`).toBeDefined();
      // The watcher's client sees the device signed by its owner, from what its server told it.
      await until(watcher.client, async () => (await watcher.client.getCrypto()!.getDeviceVerificationStatus(owner.account.userId, owner.account.deviceId))?.signedByOwner === true, `${watcher.label} seeing ${owner.label}'s device signed by its owner`);
    }
  }, 90_000);

  it('an emoji verification across the servers: each server holds its user’s signature of the other’s master key, and each client trusts the other', async () => {
    // sam asks to verify hana's device, over to-device messages between Synapse and Hearth.
    const received = new Promise<VerificationRequest>((resolve) => hana.client.on(CryptoEvent.VerificationRequestReceived, resolve));
    const request = await sam.client.getCrypto()!.requestDeviceVerification(hana.account.userId, hana.account.deviceId);
    const incoming = await received;
    await incoming.accept();
    await new Promise<void>((resolve) => {
      const ready = () => request.phase === VerificationPhase.Ready && (request.off(VerificationRequestEvent.Change, ready), resolve());
      request.on(VerificationRequestEvent.Change, ready);
      ready();
    });
    const samVerifier = await request.startVerification('m.sas.v1');
    await new Promise<void>((resolve) => {
      const started = () => incoming.verifier !== undefined && (incoming.off(VerificationRequestEvent.Change, started), resolve());
      incoming.on(VerificationRequestEvent.Change, started);
      started();
    });
    const hanaVerifier = incoming.verifier!;
    // Both see the same emoji, and both confirm.
    const shown = (verifier: typeof samVerifier) => new Promise<ShowSasCallbacks>((resolve) => verifier.on(VerifierEvent.ShowSas, resolve));
    const [samSas, hanaSas] = [shown(samVerifier), shown(hanaVerifier)];
    const verified = Promise.all([samVerifier.verify(), hanaVerifier.verify()]);
    const [samSees, hanaSees] = await Promise.all([samSas, hanaSas]);
    expect(samSees.sas.emoji?.map(([, name]) => name)).toEqual(hanaSees.sas.emoji?.map(([, name]) => name));
    await Promise.all([samSees.confirm(), hanaSees.confirm()]);
    await verified;

    for (const [verifier, verified_] of [[sam, hana], [hana, sam]] as const) {
      await until(verifier.client, async () => (await verifier.client.getCrypto()!.getUserVerificationStatus(verified_.account.userId)).isCrossSigningVerified(), `${verifier.label} trusting ${verified_.label}`);
      expect((await verifier.client.getCrypto()!.getDeviceVerificationStatus(verified_.account.userId, verified_.account.deviceId))?.crossSigningVerified).toBe(true);
      // The verifier's own server holds the verifier's user-signing key's signature of the other's master key.
      const userSigningKeyId = `ed25519:${await verifier.client.getCrypto()!.getCrossSigningKeyId(CrossSigningKey.UserSigning)}`;
      const seen = await api(verifier.server, 'POST', '/_matrix/client/v3/keys/query', { token: verifier.account.accessToken, body: { device_keys: { [verified_.account.userId]: [] } }, unchecked: true });
      expect(seen.body.master_keys[verified_.account.userId].signatures?.[verifier.account.userId]?.[userSigningKeyId], `${verifier.label}'s signature of ${verified_.label}'s master key, on ${verifier.label}'s server`).toBeTruthy();
    }
  }, 90_000);
});
