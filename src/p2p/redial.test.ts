import { describe, expect, it } from 'vitest';
import { multiaddr } from '@multiformats/multiaddr';
import { dialFailureLogger, isDialableAddress, isExpectedDialError, webrtcDialAddresses } from './redial.ts';

const named = (name: string, message: string) => Object.assign(new Error(message), { name });

describe('dial failures in the log (issue 24, peers 3)', () => {
  it('an expected failure is one line, without the error or its stack; the second failure for the same peer logs nothing', () => {
    const lines: [string, unknown][] = [];
    const logFailure = dialFailureLogger((message, error) => lines.push([message, error]));
    logFailure('could not redial', '12D3KooWPeer', named('NoValidAddressesError', 'The dial request has no valid addresses for peer: 12D3KooWPeer'));
    logFailure('could not redial', '12D3KooWPeer', named('NoValidAddressesError', 'The dial request has no valid addresses for peer: 12D3KooWPeer'));
    logFailure('could not redial', '12D3KooWPeer', named('TimeoutError', 'timed out'));
    expect(lines).toEqual([['could not redial 12D3KooWPeer: NoValidAddressesError: The dial request has no valid addresses for peer: 12D3KooWPeer', undefined]]);
    expect(lines[0]![0]).not.toContain('\n');
    // Another peer gets its own line.
    logFailure('could not redial', '12D3KooWOther', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }));
    expect(lines[1]).toEqual(['could not redial 12D3KooWOther: Error: connect ECONNREFUSED 127.0.0.1:1', undefined]);
  });

  it('a failure nobody expects keeps its error (and stack), still once per peer', () => {
    const lines: [string, unknown][] = [];
    const logFailure = dialFailureLogger((message, error) => lines.push([message, error]));
    const bug = new TypeError('cannot read properties of undefined');
    logFailure('could not redial', 'p', bug);
    logFailure('could not redial', 'p', bug);
    expect(lines).toEqual([['could not redial p', bug]]);
    expect(isExpectedDialError(bug)).toBe(false);
    expect(isExpectedDialError(new AggregateError([], 'All multiaddr dials failed'))).toBe(true);
  });

  it('relay and WebRTC addresses are not dialable later; TCP and WebSockets are', () => {
    expect(isDialableAddress('/ip4/127.0.0.1/tcp/4001/ws/p2p/12D3KooWRelay/p2p-circuit/p2p/12D3KooWPage')).toBe(false);
    expect(isDialableAddress('/ip4/127.0.0.1/tcp/4001/ws/p2p/12D3KooWRelay/p2p-circuit/webrtc/p2p/12D3KooWPage')).toBe(false);
    expect(isDialableAddress('/webrtc')).toBe(false);
    expect(isDialableAddress('/ip4/127.0.0.1/tcp/4001/ws')).toBe(true);
    expect(isDialableAddress('/ip4/127.0.0.1/udp/4001/webrtc-direct/certhash/uEiA')).toBe(true);
  });

  it("a peer's WebRTC addresses are dialled as its own: one the peer store kept without the peer's ID gets it back, so libp2p does not take the relay for the peer", () => {
    const relay = '12D3KooWBKjscCZsK4FVUMuCxXiwJNfm11BCdFZ7dQiNEBEMSazS';
    const page = '12D3KooWJo3Ad2Amx2HBhGRFPog9UQbMrr2m4dhoJAvrGn4UApQ3';
    const circuit = `/dns4/peer.hearth.test/tcp/4443/wss/p2p/${relay}/p2p-circuit`;
    // The peer ID libp2p dials (libp2p's getPeerAddress): the last /p2p/ of the address.
    const dialledPeer = (address: { getComponents(): { name: string; value?: string }[] }) => address.getComponents().findLast((c) => c.name === 'p2p')?.value;
    expect(dialledPeer(multiaddr(`${circuit}/webrtc`))).toBe(relay);
    const addresses = webrtcDialAddresses(
      [multiaddr(`${circuit}/webrtc`), multiaddr(`${circuit}/webrtc/p2p/${page}`), multiaddr(circuit), multiaddr('/ip4/192.0.2.1/udp/4001/webrtc-direct')],
      page,
    );
    expect(addresses.map(String)).toEqual([`${circuit}/webrtc/p2p/${page}`]);
    expect(addresses.map(dialledPeer)).toEqual([page]);
  });
});
