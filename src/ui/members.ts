import type { ChatClient, ChatRoom, DeviceInfo, UserTrust } from './chat.ts';
import { copyText, h } from './dom.ts';
import { describeError, describeInviteError } from './errors.ts';
import { ErrorSlot } from './error-slot.ts';

/** The open room's members, and the form that invites someone to it. */
export class MembersPane {
  readonly element = h('aside', { class: 'members', 'aria-label': 'Members' });
  // Kept across renders, so a sync does not wipe what is being typed (or what an invite link filled in).
  readonly inviteInput = h('input', { id: 'invite-user-id', placeholder: '@user:server', 'aria-label': 'User ID to invite', required: true });
  private readonly inviteError = new ErrorSlot();
  /** The member list starts open on wide screens, folded at phone width (the invite form shows either way). */
  private membersOpen = !matchMedia('(max-width: 760px)').matches;
  /** Whose device list is open, and what was last fetched of it (kept across renders). */
  private readonly devicesOpen = new Set<string>();
  private readonly deviceLists = new Map<string, DeviceInfo[] | 'loading' | 'failed'>();
  /** What the pane was last built from: a change elsewhere (a message, a receipt, typing) does not rebuild it. */
  private shown: { client: ChatClient; key: string } | undefined;

  render(client: ChatClient, room: ChatRoom | undefined): void {
    if (!room) {
      this.shown = undefined;
      return this.element.replaceChildren();
    }
    const invitee = this.inviteInput;
    const inviteError = this.inviteError;
    const members = client.joinedMembers(room);
    // In an encrypted room, whom this user verified (fetched once, then kept up to date by the client).
    const trust = new Map(room.encrypted ? members.filter((m) => m.userId !== client.userId).map((m) => [m.userId, client.userTrust(m.userId)] as const) : []);
    const key = JSON.stringify([room.id, room.encrypted, members.map((m) => [m.userId, client.displayName(room, m.userId), m.membership, trust.get(m.userId)])]);
    if (this.shown?.client === client && this.shown.key === key) return;
    this.shown = { client, key };
    // A <details>, so on a narrow screen the list folds under the room and opens on a tap; kept open or shut across renders.
    const memberDetails = h(
      'details',
      { class: 'member-details', open: this.membersOpen, ontoggle: () => (this.membersOpen = memberDetails.open) },
      h('summary', {}, h('h3', {}, `Members (${members.length})`)),
      h(
        'ul',
        { class: 'member-list' },
        ...members.map((member) =>
          h(
            'li',
            { title: member.userId },
            h('span', { class: 'name' }, client.displayName(room, member.userId)),
            member.userId === client.userId ? h('span', { class: 'hint' }, ' (you)') : null,
            member.membership === 'invite' ? h('span', { class: 'hint' }, ' invited') : null,
            trustBadge(trust.get(member.userId)),
            this.profileCard(client, room, member.userId, trust.get(member.userId)),
          ),
        ),
      ),
    );
    // A verified user's new session that they did not verify: someone may have signed in as them.
    const warnings = members.flatMap((m) => (newSessions(trust.get(m.userId)) ? [h('p', { class: 'trust-warning', role: 'alert' }, `${client.displayName(room, m.userId)} has a new session that is not verified.`)] : []));
    this.element.replaceChildren(
      ...warnings,
      memberDetails,
      h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) => {
            e.preventDefault();
            const userId = invitee.value.trim();
            inviteError.run('invite', () => client.invite(room.id, userId).then(() => (invitee.value = '')), (error) => describeInviteError(error, userId));
          },
        },
        invitee,
        h('button', { type: 'submit' }, 'Invite'),
      ),
      inviteError.element,
    );
  }

  /**
   * A member's card: the full Matrix ID with Copy, and (in an encrypted room) whether this user verified
   * them, with Verify (emoji) if not, and their devices, fetched when opened: which are verified by their owner.
   */
  private profileCard(client: ChatClient, room: ChatRoom, userId: string, trust: UserTrust | undefined): HTMLElement {
    const encrypted = room.encrypted;
    const list = this.deviceLists.get(userId);
    const details = h(
      'details',
      {
        class: 'member-devices',
        open: this.devicesOpen.has(userId),
        ontoggle: () => {
          if (!details.open) return void this.devicesOpen.delete(userId);
          // Open already before this render: the list shown is the one fetched then.
          if (this.devicesOpen.has(userId)) return;
          this.devicesOpen.add(userId);
          if (!encrypted) return;
          this.deviceLists.set(userId, 'loading');
          client.devices(userId).then(
            (devices) => this.deviceLists.set(userId, devices),
            () => this.deviceLists.set(userId, 'failed'),
          ).finally(() => body.replaceChildren(...this.deviceItems(this.deviceLists.get(userId))));
        },
      },
      h('summary', {}, 'Profile'),
    );
    const id = h('code', { class: 'member-id' }, userId);
    const copy = h('button', { type: 'button', class: 'small', onclick: () => void copyText(userId, id, copy) }, 'Copy ID');
    details.append(id, copy);
    if (encrypted && userId !== client.userId) details.append(verifyLine(client, room, userId, trust));
    const body = h('ul', { class: 'device-list', 'aria-label': `Devices of ${userId}` }, ...this.deviceItems(list));
    if (encrypted) details.append(body);
    return details;
  }

  private deviceItems(list: DeviceInfo[] | 'loading' | 'failed' | undefined): HTMLElement[] {
    if (list === undefined || list === 'loading') return [h('li', { class: 'hint' }, 'Loading\u2026')];
    if (list === 'failed') return [h('li', { class: 'hint' }, 'Could not fetch the devices.')];
    if (list.length === 0) return [h('li', { class: 'hint' }, 'No devices with encryption.')];
    return list.map((d) => h('li', { class: d.verified ? 'device verified' : 'device' }, h('code', {}, d.deviceId), d.displayName ? ` ${d.displayName}` : '', h('span', { class: 'hint' }, d.verified ? ' verified' : ' not verified')));
  }
}


/** Beside a member's name: verified by this user, or a verified user's new unverified session. */
function trustBadge(trust: UserTrust | undefined): HTMLElement | null {
  if (newSessions(trust)) return h('span', { class: 'trust-badge warning', title: 'They have a session they did not verify.' }, ' new session not verified');
  if (trust?.verified) return h('span', { class: 'trust-badge verified', title: 'You verified them by comparing emoji.' }, ' verified');
  return null;
}

/** A verified user (or one verified before) has a device they have not verified themselves. */
function newSessions(trust: UserTrust | undefined): boolean {
  return !!trust && (trust.verified || trust.wasVerified) && trust.unverifiedDevices.length > 0;
}

/** On the card: Verified, or Verify (emoji, in this room). */
function verifyLine(client: ChatClient, room: ChatRoom, userId: string, trust: UserTrust | undefined): HTMLElement {
  if (trust?.verified) return h('p', { class: 'member-trust verified' }, 'Verified');
  // Made only when it fails: the pane's other errors (the invite form's) are found as `.members .error`.
  let error: HTMLElement | undefined;
  const verify = h(
    'button',
    {
      type: 'button',
      class: 'small',
      onclick: () => {
        error?.remove();
        client.requestVerification(userId, room.id).catch((e: unknown) => {
          error = h('span', { class: 'error', role: 'alert' }, ` Could not ask to verify: ${describeError(e)}`);
          line.append(error);
        });
      },
    },
    'Verify',
  );
  const line = h('p', { class: 'member-trust' }, trust?.wasVerified ? 'Their identity changed since you verified them. ' : 'Not verified. ', verify);
  return line;
}
