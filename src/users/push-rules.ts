// The spec's server-default push rules (client-server modules/push.md, v1.17),
// and the ruleset shape the /pushrules API edits. Evaluation comes later.

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
