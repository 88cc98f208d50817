import { copyText, h } from './dom.ts';
import { ErrorSlot, succeeded } from './error-slot.ts';
import type { NodeState, PageHost } from './host.ts';
import { addressHost, addressPeerId, inviteLink, linkKind, shortServerName } from './ids.ts';

/**
 * The peers panel, the body of the Peers view (chat-screen.ts): this tab's libp2p node (its state, the peers
 * it is connected to and how each is reached, adding one by its address) and, once signed in, what a person
 * shares to be invited. It also keeps what the top bar says of it: the button that opens the view, with the
 * connection state at a glance ("Peers · 2 connected"), and the offline indicator (the browser is offline,
 * or no peer is connected).
 */
export class P2PPanel {
  readonly element: HTMLElement;
  /** For the top bar. */
  readonly offlineBadge = h('span', { class: 'offline', role: 'status', 'aria-live': 'polite', hidden: true });
  private readonly summaryState = h('span', { class: 'p2p-summary-state' });
  /** For the top bar: opens the Peers view (wired, and shown while the chat is, by chat-screen.ts). */
  readonly button = h(
    'button',
    { type: 'button', class: 'peers-button', 'aria-controls': 'peers-view', 'aria-expanded': 'false', title: 'Connected peers, how each is reached, adding one, your invite link', hidden: true },
    'Peers',
    this.summaryState,
  );
  private readonly nodeLine = h('p', { class: 'p2p-state hint' });
  private readonly noWebrtcLine = h('p', { class: 'no-webrtc hint', hidden: true }, 'This browser has no WebRTC: it reaches other browsers only through a relay peer, never directly.');
  private readonly peerList = h('ul', { class: 'peer-list', 'aria-label': 'Connected peers' });
  private readonly bootstrapList = h('ul', { class: 'bootstrap-peers', 'aria-label': 'Bootstrap peers' });
  private readonly identity = h('div', { class: 'identity' });
  private readonly actions = h('div', { class: 'p2p-actions' });
  private readonly bootstrapInput = h('input', { id: 'bootstrap-address', placeholder: '/dns4/\u2026/wss/p2p/12D3KooW\u2026', 'aria-label': 'Peer address', autocomplete: 'off', spellcheck: false });
  private readonly bootstrapError = new ErrorSlot('bootstrap-error');
  private readonly bootstrapStatus = h('p', { class: 'hint bootstrap-status', role: 'status' });
  private readonly addedList = h('ul', { class: 'added-peers', 'aria-label': 'Peers you added' });
  private peerCount = 0;

  constructor(private readonly host: PageHost) {
    // Two halves, side by side where there is room: the network (who is connected, adding a peer) and sharing (your ID, invites).
    this.element = h(
      'div',
      { class: 'p2p-panel' },
      h(
        'section',
        { class: 'p2p-network', 'aria-labelledby': 'p2p-network-title' },
        h('h3', { id: 'p2p-network-title' }, 'Connected peers'),
        this.nodeLine,
        this.noWebrtcLine,
        this.peerList,
        this.bootstrapList,
        h('h3', {}, 'Add a peer'),
        h('form', { class: 'inline add-peer', onsubmit: (e: Event) => void this.addPeer(e) }, this.bootstrapInput, h('button', { type: 'submit' }, 'Add')),
        this.bootstrapError.element,
        this.bootstrapStatus,
        this.addedList,
      ),
      h('section', { class: 'p2p-sharing' }, this.identity, this.actions),
    );
    // The host's status covers the node's state and its peers.
    host.subscribe(() => this.render());
    addEventListener('online', () => this.render());
    addEventListener('offline', () => this.render());
    // Another tab added or removed a peer (the host dials what is new if this tab runs the node).
    host.addedPeers.onChange(() => this.renderAdded());
    this.render();
    this.renderAdded();
  }

  /**
   * Keeps a bootstrap peer the person pasted (the host's added peers) and dials it now if this tab runs the node;
   * every later leader tab dials it at start. A malformed address is refused and not kept.
   */
  private async addPeer(event: Event): Promise<void> {
    event.preventDefault();
    this.bootstrapError.clear();
    this.bootstrapStatus.textContent = '';
    let address: string;
    try {
      address = this.host.addedPeers.add(this.bootstrapInput.value);
    } catch (error) {
      this.bootstrapError.show('add-peer', (error as Error).message);
      return;
    }
    this.bootstrapInput.value = '';
    this.renderAdded();
    const dialling = this.host.dial(address);
    if (!dialling) {
      // The leader tab hears of it through the storage event and dials it.
      this.bootstrapStatus.textContent = 'Kept. The tab that hosts your homeserver dials it now and whenever it starts.';
      return;
    }
    this.bootstrapStatus.textContent = 'Connecting\u2026';
    try {
      const serverName = await dialling;
      succeeded('add-peer');
      this.bootstrapStatus.textContent = `Connected to ${shortServerName(serverName)}. It is dialled again whenever your homeserver starts.`;
    } catch (error) {
      this.bootstrapStatus.textContent = '';
      const message = error instanceof Error ? error.message : String(error);
      if (error instanceof Error && /^Invalid/.test(error.name)) {
        // libp2p could not read it after all: do not keep it.
        this.host.addedPeers.remove(address);
        this.renderAdded();
        this.bootstrapError.show('add-peer', `That is not a valid peer address: ${message}.`);
      } else {
        this.bootstrapError.show('add-peer', `Kept, but the peer did not answer at that address (${message}). It is tried again whenever your homeserver starts.`);
      }
    }
  }

  private renderAdded(): void {
    const added = this.host.addedPeers.list();
    this.addedList.replaceChildren(
      ...added.map((address) =>
        h(
          'li',
          { class: 'added-peer', 'data-address': address },
          h('code', { title: address }, address.length > 48 ? `${address.slice(0, 28)}\u2026${address.slice(-12)}` : address),
          h(
            'button',
            {
              type: 'button',
              class: 'small link',
              'aria-label': `Remove ${address}`,
              onclick: () => {
                this.host.addedPeers.remove(address);
                this.renderAdded();
                this.bootstrapError.clear();
                this.bootstrapStatus.textContent = 'Removed: later tabs do not dial it. A connection open now stays until it drops.';
              },
            },
            'Remove',
          ),
        ),
      ),
    );
  }

  /** Called with a listener that runs when peers come or go (to refresh pending marks). */
  onPeersChanged(listener: () => void): void {
    let last = -1;
    this.host.subscribe(() => {
      const count = this.host.peers().length;
      if (count !== last) listener();
      last = count;
    });
  }

  /** Shows the signed-in user's Matrix ID with copy buttons and an invite link; undefined clears it. */
  showIdentity(userId: string | undefined): void {
    if (!userId) return this.identity.replaceChildren();
    // Read-only fields: the whole value in one line, and selectable where the clipboard is refused.
    // Whole here, where it is copied: a read-only text area wraps it rather than cutting it (issue 38 item 7).
    const id = h('textarea', { class: 'my-id share-value whole', readOnly: true, rows: 3, title: userId, 'aria-label': 'Your Matrix ID' });
    id.value = userId;
    const link = inviteLink(userId);
    const linkField = h('input', { class: 'invite-link-value share-value', readOnly: true, value: link, title: link, 'aria-label': 'Your invite link' });
    const copyId: HTMLButtonElement = h('button', { type: 'button', class: 'small', onclick: () => void copyText(userId, id, copyId) }, 'Copy ID');
    const copyLink: HTMLButtonElement = h('button', { type: 'button', class: 'small', onclick: () => void copyText(link, linkField, copyLink) }, 'Copy link');
    this.identity.replaceChildren(
      h('h3', {}, 'Your Matrix ID'),
      h('div', { class: 'share-row' }, id, copyId),
      h('div', { class: 'share-row' }, linkField, copyLink),
      h(
        'p',
        { class: 'hint' },
        'Send the ',
        h('a', { class: 'invite-link', href: link, title: 'Opens Hearth ready to invite you', target: '_blank', rel: 'noopener' }, 'invite link'),
        ' to someone: opening it, signed in to their Hearth, starts an invite to you.',
      ),
    );
  }

  /** Forms the App builds (start a demo room); shown under the peers. */
  setActions(...children: HTMLElement[]): void {
    this.actions.replaceChildren(...children);
  }

  private render(): void {
    const state = this.host.status.node;
    const peers = this.host.peers();
    this.peerCount = peers.length;
    this.element.dataset.state = state;
    this.button.dataset.state = state === 'running' ? (peers.length > 0 ? 'connected' : 'alone') : state;
    const stateText: Record<NodeState, string> = {
      starting: 'Node starting\u2026',
      running: 'Node running',
      failed: 'Node failed to start: federation is off in this tab',
      elsewhere: 'The node runs in the tab that hosts your homeserver',
      none: 'Node not started',
    };
    this.nodeLine.textContent = stateText[state];
    this.noWebrtcLine.hidden = this.host.status.webrtc;
    const glance: Record<NodeState, string> = { starting: 'starting\u2026', running: `${peers.length} connected`, failed: 'node failed', elsewhere: 'in the other tab', none: 'off' };
    this.summaryState.textContent = ` \u00b7 ${glance[state]}`;
    this.peerList.replaceChildren(
      ...(peers.length === 0
        ? [h('li', { class: 'hint no-peers' }, state === 'elsewhere' ? 'Peers are listed in that tab.' : 'No peers connected.')]
        : peers
            .slice()
            .sort((a, b) => a.server_name.localeCompare(b.server_name))
            .map((peer) => {
              const name = h('code', { class: 'peer-name', title: peer.server_name }, shortServerName(peer.server_name));
              const copy: HTMLButtonElement = h(
                'button',
                { type: 'button', class: 'small link', 'aria-label': `Copy server name ${peer.server_name}`, onclick: () => void copyText(peer.server_name, name, copy) },
                'Copy',
              );
              return h(
                'li',
                { class: 'peer', 'data-server-name': peer.server_name, 'data-via': peer.via },
                name,
                h('span', { class: `via ${peer.via}`, title: peer.via === 'direct' ? 'A direct connection' : 'Through a relay peer' }, peer.via),
                h('span', { class: 'how hint' }, [...new Set((peer.multiaddrs ?? []).map(linkKind))].join(', ')),
                copy,
              );
            })),
    );
    this.renderBootstrap(peers);
    this.renderOffline(state);
  }

  /** Which of the site's bootstrap peers (and those added here) this tab's node reached, and over what; any may be down. */
  private renderBootstrap(peers: ReturnType<PageHost['peers']>): void {
    const addresses = this.host.bootstrapPeers?.() ?? [];
    if (addresses.length === 0) return this.bootstrapList.replaceChildren();
    const reached = addresses.filter((address) => peers.some((peer) => peer.peer_id !== undefined && peer.peer_id === addressPeerId(address)));
    this.bootstrapList.replaceChildren(
      h('li', { class: 'hint bootstrap-summary' }, `Bootstrap peers: ${reached.length} of ${addresses.length} reached`),
      ...addresses.map((address) => {
        const peer = peers.find((p) => p.peer_id !== undefined && p.peer_id === addressPeerId(address));
        const how = peer ? [...new Set((peer.multiaddrs ?? []).map(linkKind))].join(', ') : '';
        return h(
          'li',
          { class: 'bootstrap-peer', 'data-reached': String(Boolean(peer)), title: address },
          h('code', {}, addressHost(address)),
          ' ',
          h('span', { class: 'hint' }, peer ? `reached over ${how}` : 'not reached: tried again every few seconds'),
        );
      }),
    );
  }

  private renderOffline(state: NodeState): void {
    // No peer counts only where this tab runs the node: a follower cannot see the leader's peers.
    const reason = !navigator.onLine ? 'browser' : (state === 'running' || state === 'failed') && this.peerCount === 0 ? 'no-peers' : undefined;
    if (reason) document.body.dataset.offline = reason;
    else delete document.body.dataset.offline;
    this.offlineBadge.hidden = !reason;
    this.offlineBadge.dataset.reason = reason ?? '';
    this.offlineBadge.textContent = reason === 'browser' ? 'Offline' : reason === 'no-peers' ? 'No peers' : '';
    this.offlineBadge.title =
      reason === 'browser'
        ? 'This browser is offline. Your rooms still work here; messages for other servers wait and go when you are back.'
        : 'No peer is connected. Messages for other servers wait until one is.';
  }
}
