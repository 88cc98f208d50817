// The spec's server-default push rules (client-server modules/push.md, v1.17),
// the ruleset shape the /pushrules API edits, and their evaluation.

export type PushAction = string | { set_tweak: string; value?: unknown };
export interface PushCondition {
  kind: string;
  key?: string;
  pattern?: string;
  value?: unknown;
  is?: string;
}
export interface PushRule {
  rule_id: string;
  default: boolean;
  enabled: boolean;
  actions: PushAction[];
  conditions?: PushCondition[];
  pattern?: string;
}
export const PUSH_RULE_KINDS = ['override', 'content', 'room', 'sender', 'underride'] as const;
export type PushRuleKind = (typeof PUSH_RULE_KINDS)[number];
export type PushRuleset = Record<PushRuleKind, PushRule[]>;

const rule = (rule_id: string, conditions: PushCondition[], actions: PushAction[], enabled = true): PushRule => ({
  rule_id, default: true, enabled, conditions, actions,
});
const match = (key: string, pattern: string): PushCondition => ({ kind: 'event_match', key, pattern });
const sound = (value: string): PushAction => ({ set_tweak: 'sound', value });
const highlight: PushAction = { set_tweak: 'highlight' };

export function defaultPushRules(userId: string): PushRuleset {
  return {
    override: [
      rule('.m.rule.master', [], [], false),
      rule('.m.rule.suppress_notices', [match('content.msgtype', 'm.notice')], []),
      rule('.m.rule.invite_for_me', [match('type', 'm.room.member'), match('content.membership', 'invite'), match('state_key', userId)], ['notify', sound('default')]),
      rule('.m.rule.member_event', [match('type', 'm.room.member')], []),
      rule('.m.rule.is_user_mention', [{ kind: 'event_property_contains', key: 'content.m\\.mentions.user_ids', value: userId }], ['notify', sound('default'), highlight]),
      rule('.m.rule.is_room_mention', [{ kind: 'event_property_is', key: 'content.m\\.mentions.room', value: true }, { kind: 'sender_notification_permission', key: 'room' }], ['notify', highlight]),
      rule('.m.rule.tombstone', [match('type', 'm.room.tombstone'), match('state_key', '')], ['notify', highlight]),
      rule('.m.rule.reaction', [match('type', 'm.reaction')], []),
      rule('.m.rule.room.server_acl', [match('type', 'm.room.server_acl'), match('state_key', '')], []),
      rule('.m.rule.suppress_edits', [{ kind: 'event_property_is', key: 'content.m\\.relates_to.rel_type', value: 'm.replace' }], []),
    ],
    content: [],
    room: [],
    sender: [],
    underride: [
      rule('.m.rule.call', [match('type', 'm.call.invite')], ['notify', sound('ring')]),
      rule('.m.rule.encrypted_room_one_to_one', [{ kind: 'room_member_count', is: '2' }, match('type', 'm.room.encrypted')], ['notify', sound('default')]),
      rule('.m.rule.room_one_to_one', [{ kind: 'room_member_count', is: '2' }, match('type', 'm.room.message')], ['notify', sound('default')]),
      rule('.m.rule.message', [match('type', 'm.room.message')], ['notify']),
      rule('.m.rule.encrypted', [match('type', 'm.room.encrypted')], ['notify']),
    ],
  };
}

// ------------------------------------------------------------------ evaluation
// Which rule an event matches for a user, and what its actions say (client-server
// modules/push §Push Rules). Pure: the room facts a condition needs come in a context.

/** What conditions need to know of the room and the user, as the room is now. */
export interface PushContext {
  /** The user whose rules these are. */
  userId: string;
  /** Their display name in the room (contains_display_name). */
  displayName: string | undefined;
  /** The number of joined members (room_member_count); asked only when a rule needs it. */
  memberCount: () => Promise<number>;
  /** A user's power level, and the level a notification type needs (sender_notification_permission). */
  powerLevel: (userId: string) => number;
  notificationLevel: (key: string) => number;
}

/** An event as push rules see it: its fields, content included (a PDU or a client event). */
export type PushEvent = { type: string; sender: string; room_id: string; state_key?: string; content: Record<string, unknown> } & Record<string, unknown>;

/** The outcome for a rule that matched: whether it notifies and highlights, and its actions (historical ones dropped). */
export interface PushOutcome {
  ruleId: string;
  notify: boolean;
  highlight: boolean;
  /** Whether it counts as unread (MSC2625): `notify` or the `mark_unread` action (unstable `org.matrix.msc2625.mark_unread`). */
  markUnread: boolean;
  actions: PushAction[];
}

/** MSC2625's action: the event counts as unread without notifying. */
const MARK_UNREAD_ACTIONS = new Set(['org.matrix.msc2625.mark_unread', 'mark_unread']);

/** The first enabled rule, in the spec's order of kinds, that matches the event; undefined when none does. */
export async function evaluatePushRules(rules: PushRuleset, event: PushEvent, context: PushContext): Promise<PushOutcome | undefined> {
  for (const kind of PUSH_RULE_KINDS) {
    for (const rule of rules[kind] ?? []) {
      if (!rule.enabled || !(await ruleMatches(kind, rule, event, context))) continue;
      const actions = (rule.actions ?? []).filter((a) => a !== 'dont_notify' && a !== 'coalesce');
      const highlight = actions.find((a): a is { set_tweak: string; value?: unknown } => typeof a === 'object' && a !== null && a.set_tweak === 'highlight');
      const notify = actions.includes('notify');
      return {
        ruleId: rule.rule_id,
        notify,
        highlight: highlight !== undefined && highlight.value !== false,
        markUnread: notify || actions.some((a) => typeof a === 'string' && MARK_UNREAD_ACTIONS.has(a)),
        actions,
      };
    }
  }
  return undefined;
}

async function ruleMatches(kind: PushRuleKind, rule: PushRule, event: PushEvent, context: PushContext): Promise<boolean> {
  switch (kind) {
    case 'room':
      return event.room_id === rule.rule_id;
    case 'sender':
      return event.sender === rule.rule_id;
    case 'content': {
      const body = event.content['body'];
      return typeof rule.pattern === 'string' && typeof body === 'string' && globMatches(rule.pattern, body, true);
    }
    default:
      for (const condition of rule.conditions ?? []) if (!(await conditionHolds(condition, event, context))) return false;
      return true;
  }
}

async function conditionHolds(condition: PushCondition, event: PushEvent, context: PushContext): Promise<boolean> {
  switch (condition.kind) {
    case 'event_match': {
      if (typeof condition.key !== 'string' || typeof condition.pattern !== 'string') return false;
      const value = propertyAt(event, condition.key);
      return typeof value === 'string' && globMatches(condition.pattern, value, condition.key === 'content.body');
    }
    case 'event_property_is': {
      if (typeof condition.key !== 'string') return false;
      const value = propertyAt(event, condition.key);
      return isSimpleValue(value) && value === condition.value;
    }
    case 'event_property_contains': {
      if (typeof condition.key !== 'string') return false;
      const value = propertyAt(event, condition.key);
      return Array.isArray(value) && value.some((item) => isSimpleValue(item) && item === condition.value);
    }
    case 'contains_display_name': {
      const body = event.content['body'];
      const name = context.displayName;
      return typeof body === 'string' && !!name && new RegExp(`(^|\\W)${escapeRegex(name)}(\\W|$)`, 'iu').test(body);
    }
    case 'room_member_count':
      return typeof condition.is === 'string' && compareCount(await context.memberCount(), condition.is);
    case 'sender_notification_permission':
      return typeof condition.key === 'string' && context.powerLevel(event.sender) >= context.notificationLevel(condition.key);
    default:
      // Unrecognised conditions match nothing.
      return false;
  }
}

/** A dot-separated property path (client-server appendices): `\.` is a literal dot, `\\` a backslash. */
export function propertyAt(event: Record<string, unknown>, path: string): unknown {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < path.length; i++) {
    const char = path[i]!;
    if (char === '\\' && (path[i + 1] === '.' || path[i + 1] === '\\')) {
      current += path[++i];
    } else if (char === '.') {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  let value: unknown = event;
  for (const part of parts) {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

const isSimpleValue = (value: unknown): boolean =>
  value === null || typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isSafeInteger(value));

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const globCache = new Map<string, RegExp>();

/**
 * Glob matching (client-server appendices §Glob-style matching: `*` any run, `?` one
 * character), case-insensitive, of the whole value; or, for content.body, of any
 * substring that starts and ends at a word boundary (not a letter, digit or `_`).
 */
export function globMatches(pattern: string, value: string, words: boolean): boolean {
  const cacheKey = `${words ? 'w' : 'v'}${pattern}`;
  let regex = globCache.get(cacheKey);
  if (!regex) {
    const body = [...pattern].map((c) => (c === '*' ? '.*' : c === '?' ? '.' : escapeRegex(c))).join('');
    regex = words ? new RegExp(`(?:^|[^A-Za-z0-9_])${body}(?:[^A-Za-z0-9_]|$)`, 'isu') : new RegExp(`^${body}$`, 'isu');
    if (globCache.size > 1000) globCache.clear();
    globCache.set(cacheKey, regex);
  }
  return regex.test(value);
}

/** room_member_count's `is`: a number, optionally after ==, <, >, <= or >=. */
function compareCount(count: number, is: string): boolean {
  const match = /^(==|<=|>=|<|>)?(\d+)$/.exec(is);
  if (!match) return false;
  const n = Number(match[2]);
  switch (match[1]) {
    case '<':
      return count < n;
    case '>':
      return count > n;
    case '<=':
      return count <= n;
    case '>=':
      return count >= n;
    default:
      return count === n;
  }
}
