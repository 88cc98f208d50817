import { splitStateKey, stateKey, type StateKey } from '../events/event.ts';

/**
 * A room's required_state request, merged from every list and subscription that holds the room:
 * which state keys it wants, with `*` wildcards, `$LAZY` members (the timeline's senders) and `$ME`.
 */
export class RequiredState {
  private readonly all: boolean;
  private readonly types = new Set<string>();
  private readonly keys = new Set<StateKey>();
  private readonly anyType = new Set<string>();
  readonly lazyMembers: boolean;

  constructor(
    pairs: string[][],
    private readonly userId: string,
  ) {
    let all = false;
    let lazy = false;
    for (const [type = '', key = ''] of pairs) {
      if (type === '*' && key === '*') all = true;
      else if (type === '*') this.anyType.add(key === '$ME' ? userId : key);
      else if (key === '*') this.types.add(type);
      else if (type === 'm.room.member' && key === '$LAZY') lazy = true;
      else this.keys.add(stateKey(type, key === '$ME' ? userId : key));
    }
    this.all = all;
    this.lazyMembers = lazy;
  }

  /** Whether a state key is asked for (lazy members aside, which depend on the timeline). */
  wants(key: StateKey): boolean {
    if (this.all || this.keys.has(key)) return true;
    const [type, stateKeyPart] = splitStateKey(key);
    return this.types.has(type) || this.anyType.has(stateKeyPart);
  }

  /** The canonical text of a room's config (its sorted pairs and its timeline limit), to tell what changed since it was last sent. */
  static key(config: { required_state: string[][]; timeline_limit: number }): string {
    return JSON.stringify([[...new Set(config.required_state.map((p) => JSON.stringify([p[0] ?? '', p[1] ?? ''])))].sort(), config.timeline_limit]);
  }

  /** What changed between the config a room was sent with and this one. */
  static compare(sent: string, now: string): { stateChanged: boolean; timelineGrew: boolean } {
    const [sentPairs, sentLimit] = JSON.parse(sent) as [string[], number];
    const [nowPairs, nowLimit] = JSON.parse(now) as [string[], number];
    return { stateChanged: JSON.stringify(sentPairs) !== JSON.stringify(nowPairs), timelineGrew: nowLimit > sentLimit };
  }
}

/** Merges the configs of every list and subscription holding a room: the union of required_state, the largest timeline_limit. */
export function mergeConfigs(configs: { required_state: string[][]; timeline_limit: number }[]): { required_state: string[][]; timeline_limit: number } {
  const pairs = new Map<string, string[]>();
  let limit = 0;
  for (const config of configs) {
    for (const pair of config.required_state) pairs.set(JSON.stringify(pair), pair);
    limit = Math.max(limit, config.timeline_limit);
  }
  return { required_state: [...pairs.values()], timeline_limit: limit };
}
