import { describe, expect, it } from 'vitest';
import { defaultPushRules, evaluatePushRules, globMatches, propertyAt, type PushContext, type PushEvent, type PushRule } from './push-rules.ts';

// The examples of client-server modules/push §Conditions and appendices §Glob-style matching.

const bob = '@bob:example.org';
const context = (overrides: Partial<PushContext> = {}): PushContext => ({
  userId: bob, displayName: 'Bob', memberCount: async () => 5, powerLevel: () => 0, notificationLevel: () => 50, ...overrides,
});
const event = (fields: Partial<PushEvent> & { content: Record<string, unknown> }): PushEvent => ({
  type: 'm.room.message', sender: '@alice:example.org', room_id: '!room:example.org', ...fields,
});
const only = (rule: Omit<PushRule, 'default' | 'enabled'>, kind: 'override' | 'content' | 'room' | 'sender' | 'underride' = 'override') => {
  const rules = { override: [], content: [], room: [], sender: [], underride: [] } as Record<string, PushRule[]>;
  rules[kind]!.push({ default: false, enabled: true, ...rule });
  return rules as never;
};

describe('push rule conditions', () => {
  it('event_match: a case-insensitive glob over the whole value', () => {
    for (const topic of ['Lunch plans', 'LUNCH']) expect(globMatches('lunc?*', topic, false)).toBe(true);
    for (const topic of [' lunch', 'lunc']) expect(globMatches('lunc?*', topic, false)).toBe(false);
  });

  it('event_match on content.body: any substring between word boundaries', () => {
    for (const body of ['An example event.', 'exple', 'An exciting triple-whammy']) expect(globMatches('ex*ple', body, true)).toBe(true);
    expect(globMatches('ex*ple', 'examples', true)).toBe(false);
  });

  it('reads dot-separated paths with escaped dots', () => {
    const e = { content: { 'm.federate': true, 'm.mentions': { user_ids: [bob] } } };
    expect(propertyAt(e, 'content.m\\.federate')).toBe(true);
    expect(propertyAt(e, 'content.m\\.mentions.user_ids')).toEqual([bob]);
    expect(propertyAt(e, 'content.m.federate')).toBeUndefined();
  });

  it('event_property_is matches exact simple values only; a missing or non-string value never matches event_match', async () => {
    const rules = only({ rule_id: 'federate', conditions: [{ kind: 'event_property_is', key: 'content.m\\.federate', value: true }], actions: ['notify'] });
    expect(await evaluatePushRules(rules, event({ content: { 'm.federate': true } }), context())).toMatchObject({ ruleId: 'federate' });
    for (const value of ['true', 1]) expect(await evaluatePushRules(rules, event({ content: { 'm.federate': value } }), context())).toBeUndefined();
    const star = only({ rule_id: 'topic', conditions: [{ kind: 'event_match', key: 'content.topic', pattern: '*' }], actions: ['notify'] });
    expect(await evaluatePushRules(star, event({ content: { topic: null } }), context())).toBeUndefined();
    expect(await evaluatePushRules(star, event({ content: {} }), context())).toBeUndefined();
  });

  it('event_property_contains, room_member_count, sender_notification_permission, and unknown conditions', async () => {
    const contains = only({ rule_id: 'alias', conditions: [{ kind: 'event_property_contains', key: 'content.alt_aliases', value: '#myroom:example.com' }], actions: [] });
    expect(await evaluatePushRules(contains, event({ content: { alt_aliases: ['#somewhere:example.org', '#myroom:example.com'] } }), context())).toBeDefined();
    expect(await evaluatePushRules(contains, event({ content: { alt_aliases: [':example.com'] } }), context())).toBeUndefined();
    for (const [is, count, matches] of [['2', 2, true], ['==2', 3, false], ['<3', 2, true], ['>=5', 5, true], ['>5', 5, false], ['bad', 5, false]] as const) {
      const rules = only({ rule_id: 'count', conditions: [{ kind: 'room_member_count', is }], actions: [] });
      expect(!!(await evaluatePushRules(rules, event({ content: {} }), context({ memberCount: async () => count }))), is).toBe(matches);
    }
    const permission = only({ rule_id: 'perm', conditions: [{ kind: 'sender_notification_permission', key: 'room' }], actions: [] });
    expect(await evaluatePushRules(permission, event({ content: {} }), context({ powerLevel: () => 50 }))).toBeDefined();
    expect(await evaluatePushRules(permission, event({ content: {} }), context({ powerLevel: () => 49 }))).toBeUndefined();
    const unknown = only({ rule_id: 'future', conditions: [{ kind: 'org.example.future' }], actions: ['notify'] });
    expect(await evaluatePushRules(unknown, event({ content: {} }), context())).toBeUndefined();
  });

  it('contains_display_name matches the name as a word', async () => {
    const rules = only({ rule_id: 'name', conditions: [{ kind: 'contains_display_name' }], actions: ['notify'] });
    expect(await evaluatePushRules(rules, event({ content: { body: 'hi bob!' } }), context())).toBeDefined();
    expect(await evaluatePushRules(rules, event({ content: { body: 'bobcat' } }), context())).toBeUndefined();
  });
});

describe('the default rules', () => {
  const evaluate = (e: PushEvent, ctx = context()) => evaluatePushRules(defaultPushRules(bob), e, ctx);

  it('notify for messages, highlight for mentions of the user, and say nothing of notices, edits, reactions and members', async () => {
    expect(await evaluate(event({ content: { msgtype: 'm.text', body: 'hi' } }))).toMatchObject({ ruleId: '.m.rule.message', notify: true, highlight: false });
    expect(await evaluate(event({ content: { msgtype: 'm.text', body: 'hi', 'm.mentions': { user_ids: [bob] } } }))).toMatchObject({ ruleId: '.m.rule.is_user_mention', notify: true, highlight: true });
    expect(await evaluate(event({ content: { msgtype: 'm.notice', body: 'bot' } }))).toMatchObject({ notify: false });
    expect(await evaluate(event({ content: { body: '* x', 'm.relates_to': { rel_type: 'm.replace', event_id: '$x' } } }))).toMatchObject({ ruleId: '.m.rule.suppress_edits', notify: false });
    expect(await evaluate(event({ type: 'm.reaction', content: {} }))).toMatchObject({ notify: false });
    expect(await evaluate(event({ type: 'm.room.member', state_key: '@carol:example.org', content: { membership: 'join' } }))).toMatchObject({ notify: false });
    expect(await evaluate(event({ type: 'm.room.member', state_key: bob, content: { membership: 'invite' } }))).toMatchObject({ ruleId: '.m.rule.invite_for_me', notify: true });
    expect(await evaluate(event({ type: 'org.example.custom', content: {} }))).toBeUndefined();
  });

  it('@room highlights only from a sender with the notifications.room level; one-to-one rooms and encrypted events notify', async () => {
    const roomMention = event({ content: { msgtype: 'm.text', body: 'all', 'm.mentions': { room: true } } });
    expect(await evaluate(roomMention, context({ powerLevel: () => 100 }))).toMatchObject({ ruleId: '.m.rule.is_room_mention', highlight: true });
    expect(await evaluate(roomMention)).toMatchObject({ ruleId: '.m.rule.message', highlight: false });
    expect(await evaluate(event({ content: { msgtype: 'm.text', body: 'hi' } }), context({ memberCount: async () => 2 }))).toMatchObject({ ruleId: '.m.rule.room_one_to_one' });
    expect(await evaluate(event({ type: 'm.room.encrypted', content: { ciphertext: 'x' } }))).toMatchObject({ ruleId: '.m.rule.encrypted', notify: true });
  });

  it('ignore the historical dont_notify and coalesce actions; a highlight tweak of false does not highlight', async () => {
    const rules = only({ rule_id: 'old', conditions: [], actions: ['dont_notify', 'coalesce', { set_tweak: 'highlight', value: false }] });
    expect(await evaluatePushRules(rules, event({ content: {} }), context())).toEqual({ ruleId: 'old', notify: false, highlight: false, markUnread: false, actions: [{ set_tweak: 'highlight', value: false }] });
  });
});
