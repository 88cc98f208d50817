import type { ChatClient, ChatRoom } from './chat.ts';
import { h } from './dom.ts';
import { describeInviteError } from './errors.ts';
import { ErrorSlot, succeeded } from './error-slot.ts';

/** The open room's members, and the form that invites someone to it. */
export class MembersPane {
  readonly element = h('aside', { class: 'members', 'aria-label': 'Members' });
  // Kept across renders, so a sync does not wipe what is being typed (or what an invite link filled in).
  readonly inviteInput = h('input', { id: 'invite-user-id', placeholder: '@user:server', 'aria-label': 'User ID to invite', required: true });
  private readonly inviteError = new ErrorSlot();
  /** The member list starts open on wide screens, folded at phone width (the invite form shows either way). */
  private membersOpen = !matchMedia('(max-width: 760px)').matches;

  render(client: ChatClient, room: ChatRoom | undefined): void {
    if (!room) return this.element.replaceChildren();
    const invitee = this.inviteInput;
    const inviteError = this.inviteError;
    const members = client.joinedMembers(room);
    // A <details>, so on a narrow screen the list folds under the room and opens on a tap; kept open or shut across renders.
    const memberDetails = h(
      'details',
      { class: 'member-details', open: this.membersOpen, ontoggle: () => (this.membersOpen = memberDetails.open) },
      h('summary', {}, h('h3', {}, `Members (${members.length})`)),
      h(
        'ul',
        { class: 'member-list' },
        ...members.map((member) =>
          h('li', { title: member.userId }, h('span', { class: 'name' }, client.displayName(room, member.userId)), member.userId === client.userId ? h('span', { class: 'hint' }, ' (you)') : null, member.membership === 'invite' ? h('span', { class: 'hint' }, ' invited') : null),
        ),
      ),
    );
    this.element.replaceChildren(
      memberDetails,
      h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) => {
            e.preventDefault();
            const userId = invitee.value.trim();
            inviteError.clear();
            client.invite(room.id, userId).then(
              () => ((invitee.value = ''), succeeded('invite')),
              (error) => inviteError.show('invite', describeInviteError(error, userId)),
            );
          },
        },
        invitee,
        h('button', { type: 'submit' }, 'Invite'),
      ),
      inviteError.element,
    );
  }
}
