import { describe, expect, it } from 'vitest';
import { api } from '../integration/harness.ts';
import { sdk, waitFor } from '../integration/sdk.ts';
import { askUntil, membership, putState, synapseAndHearth, type Side } from '../support/synapse-interop.ts';

// Finding rooms and people on the other server (issue 35, item 8), both ways: the other server's
// public room directory (`/publicRooms?server=`, GET and the filtered POST), the hierarchy of a
// space whose child rooms only the other server holds, profiles of the other server's users, and
// the user directory's search finding a user of the other server who shares a room.

// Synapse by default lets no one publish a room in its directory, and keeps its directory from
// other servers; the spec has neither switch. Both are turned on here.
const servers = synapseAndHearth({ synapseConfig: { allow_public_rooms_over_federation: true, room_list_publication_rules: [{ action: 'allow' }] } });

describe.each([
  { direction: 'Synapse’s, seen from Hearth', owner: () => servers.onSynapse, visitor: () => servers.onHearth },
  { direction: 'Hearth’s, seen from Synapse', owner: () => servers.onHearth, visitor: () => servers.onSynapse },
])('$direction', ({ owner: ownerSide, visitor: visitorSide }) => {
  const word = () => (ownerSide() === servers.onSynapse ? 'synapsia' : 'hearthia');

  it('the public room directory of the other server, whole and filtered', async () => {
    const [owner, visitor] = [ownerSide(), visitorSide()];
    const { room_id: listed } = await owner.client.createRoom({
      preset: sdk.Preset.PublicChat,
      visibility: sdk.Visibility.Public,
      name: `Listed in ${word()}`,
      topic: 'a room anyone may find',
      room_alias_name: `listed-${word()}`,
    });
    // A public room not published in the directory is not listed.
    const { room_id: unlisted } = await owner.client.createRoom({ preset: sdk.Preset.PublicChat, name: `Unlisted in ${word()}` });

    // The owner's server lists it first (Synapse, from room stats it updates in the background).
    await askUntil(() => api(owner.server, 'GET', '/_matrix/client/v3/publicRooms', { token: owner.account.accessToken }), (r) => r.body.chunk.some((room: any) => room.room_id === listed && room.name), `${listed} in ${owner.label}'s own directory`);
    const whole = await api(visitor.server, 'GET', `/_matrix/client/v3/publicRooms?server=${encodeURIComponent(owner.server.name)}`, { token: visitor.account.accessToken });
    expect(whole.status, JSON.stringify(whole.body)).toBe(200);
    const entry = whole.body.chunk.find((r: any) => r.room_id === listed);
    expect(entry).toMatchObject({
      room_id: listed,
      name: `Listed in ${word()}`,
      topic: 'a room anyone may find',
      canonical_alias: `#listed-${word()}:${owner.server.name}`,
      num_joined_members: 1,
      world_readable: false,
      guest_can_join: false,
      join_rule: 'public',
    });
    expect(whole.body.chunk.map((r: any) => r.room_id)).not.toContain(unlisted);

    const filtered = await api(visitor.server, 'POST', `/_matrix/client/v3/publicRooms?server=${encodeURIComponent(owner.server.name)}`, {
      token: visitor.account.accessToken,
      body: { limit: 10, filter: { generic_search_term: word() } },
    });
    expect(filtered.status, JSON.stringify(filtered.body)).toBe(200);
    expect(filtered.body.chunk.map((r: any) => r.room_id)).toEqual([listed]);
    const none = await api(visitor.server, 'POST', `/_matrix/client/v3/publicRooms?server=${encodeURIComponent(owner.server.name)}`, {
      token: visitor.account.accessToken,
      body: { limit: 10, filter: { generic_search_term: 'nothing-is-called-this' } },
    });
    expect(none.body.chunk).toEqual([]);
  });

  it('the hierarchy of a space whose child rooms only the other server holds', async () => {
    const [owner, visitor] = [ownerSide(), visitorSide()];
    const { room_id: open } = await owner.client.createRoom({ preset: sdk.Preset.PublicChat, name: `Open room of ${word()}`, topic: 'come in' });
    const { room_id: closed } = await owner.client.createRoom({ preset: sdk.Preset.PrivateChat, name: `Closed room of ${word()}` });
    const { room_id: space } = await owner.client.createRoom({
      preset: sdk.Preset.PublicChat,
      name: `Space of ${word()}`,
      creation_content: { type: 'm.space' },
    });
    await putState(owner, space, 'm.space.child', { via: [owner.server.name], suggested: true }, open);
    await putState(owner, space, 'm.space.child', { via: [owner.server.name] }, closed);
    // The visitor is in the space, so their server knows it; it knows neither child room, which it
    // must ask the owner's server about (`/_matrix/federation/v1/hierarchy`).
    await visitor.client.joinRoom(space, { viaServers: [owner.server.name] });
    await waitFor(owner.client, () => membership(owner.client, space, visitor.account.userId) === 'join', 15_000, `the join of the space on ${owner.label}`);

    const hierarchy = await api(visitor.server, 'GET', `/_matrix/client/v1/rooms/${encodeURIComponent(space)}/hierarchy`, { token: visitor.account.accessToken });
    expect(hierarchy.status, JSON.stringify(hierarchy.body)).toBe(200);
    const rooms = new Map<string, any>(hierarchy.body.rooms.map((r: any) => [r.room_id, r]));
    expect([...rooms.keys()].sort()).toEqual([space, open].sort());
    expect(rooms.get(space)).toMatchObject({ room_type: 'm.space', name: `Space of ${word()}`, join_rule: 'public' });
    expect(rooms.get(space).children_state.map((e: any) => e.state_key).sort()).toEqual([open, closed].sort());
    expect(rooms.get(open)).toMatchObject({ name: `Open room of ${word()}`, topic: 'come in', num_joined_members: 1, join_rule: 'public', world_readable: false, guest_can_join: false });

    // Only the suggested rooms, when asked.
    const suggested = await api(visitor.server, 'GET', `/_matrix/client/v1/rooms/${encodeURIComponent(space)}/hierarchy?suggested_only=true`, { token: visitor.account.accessToken });
    expect(suggested.status).toBe(200);
    expect(suggested.body.rooms.map((r: any) => r.room_id).sort()).toEqual([space, open].sort());
    // (The spec does not say whether children_state keeps the children that are not suggested: Synapse drops them, Hearth keeps them.)
  });

  it('profiles of the other server’s users, and a user that does not exist there', async () => {
    const [owner, visitor] = [ownerSide(), visitorSide()];
    const name = `Someone of ${word()}`;
    const avatar = `mxc://${owner.server.name}/avatar${word()}`;
    await owner.client.setDisplayName(name);
    await owner.client.setAvatarUrl(avatar);

    const profile = await api(visitor.server, 'GET', `/_matrix/client/v3/profile/${encodeURIComponent(owner.account.userId)}`, { token: visitor.account.accessToken });
    expect(profile.status, JSON.stringify(profile.body)).toBe(200);
    expect(profile.body).toMatchObject({ displayname: name, avatar_url: avatar });
    const displayname = await api(visitor.server, 'GET', `/_matrix/client/v3/profile/${encodeURIComponent(owner.account.userId)}/displayname`, { token: visitor.account.accessToken });
    expect(displayname.body).toEqual({ displayname: name });

    const nobody = `@nobody-${word()}:${owner.server.name}`;
    const missing = await api(visitor.server, 'GET', `/_matrix/client/v3/profile/${encodeURIComponent(nobody)}`, { token: visitor.account.accessToken, unchecked: true });
    expect(missing.status, JSON.stringify(missing.body)).toBe(404);
    expect(missing.body.errcode).toBe('M_NOT_FOUND');
  });

  it('the user directory finds a user of the other server who shares a room', async () => {
    const [owner, visitor] = [ownerSide(), visitorSide()];
    // Someone new on the owner's server with a name found nowhere else, in a room the visitor joins.
    const findable: Side = await servers.person(owner.server, `findable-${word()}`);
    const name = `Findable Person of ${word()}`;
    await findable.client.setDisplayName(name);
    const { room_id: roomId } = await findable.client.createRoom({ preset: sdk.Preset.PublicChat, name: 'Meeting place' });
    await visitor.client.joinRoom(roomId, { viaServers: [owner.server.name] });
    await waitFor(visitor.client, () => visitor.client.getRoom(roomId)?.getMember(findable.account.userId)?.name === name, 15_000, `the findable person on ${visitor.label}`);

    // Synapse answers `avatar_url: null` for a user without one, where the spec has a string or nothing: not checked against the spec.
    const search = (term: string) => api(visitor.server, 'POST', '/_matrix/client/v3/user_directory/search', { token: visitor.account.accessToken, body: { search_term: term, limit: 10 }, unchecked: visitor.server === servers.synapse });
    // Synapse fills its directory from room state in the background.
    const found = await askUntil(() => search(`Findable Person of ${word()}`), (r) => r.body.results?.length > 0, `${findable.account.userId} in ${visitor.label}'s user directory`);
    expect(found.status, JSON.stringify(found.body)).toBe(200);
    expect(found.body.results).toEqual([expect.objectContaining({ user_id: findable.account.userId, display_name: name })]);
    // By the user ID's localpart too.
    const byId = await search(`findable-${word()}`);
    expect(byId.body.results.map((r: any) => r.user_id)).toContain(findable.account.userId);
  });
});
