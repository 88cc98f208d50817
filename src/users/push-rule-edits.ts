import { PUSH_RULE_KINDS, type PushRule, type PushRuleKind, type PushRuleset } from './push-rules.ts';
import { UsersError } from './errors.ts';

// A user's push rules as the client API edits them (client-server modules/push: /pushrules): they live in the
// `m.push_rules` account data, seeded with the defaults at registration, and change only through here.

/** The account data this needs: the users component's own store. */
export interface PushRulesAccountData {
  get(userId: string, roomId: string, type: string): Promise<Record<string, unknown> | undefined>;
  update<T extends object>(userId: string, roomId: string, type: string, update: (current: T | undefined) => T): Promise<T>;
}

export const PUSH_RULES_TYPE = 'm.push_rules';

/** What a client gives for a rule of its own (PUT /pushrules/global/{kind}/{ruleId}). */
export interface NewPushRule {
  actions: unknown[];
  conditions?: Record<string, unknown>[];
  pattern?: string;
}

type StoredRules = { global: PushRuleset };

export function parsePushRuleKind(kind: string): PushRuleKind {
  if (!(PUSH_RULE_KINDS as readonly string[]).includes(kind)) throw new UsersError(400, 'M_INVALID_PARAM', `unknown push rule kind ${kind}`);
  return kind as PushRuleKind;
}

export class PushRules {
  constructor(private readonly accountData: PushRulesAccountData) {}

  async ruleset(userId: string): Promise<PushRuleset> {
    const content = (await this.accountData.get(userId, '', PUSH_RULES_TYPE)) as StoredRules | undefined;
    return content!.global;
  }

  async rule(userId: string, kind: PushRuleKind, ruleId: string): Promise<PushRule> {
    return findRule(await this.ruleset(userId), kind, ruleId);
  }

  /**
   * Adds or replaces one of the user's own rules. A new rule goes first among the user's rules of its kind
   * (newest first, as Synapse), which sit before the server-default rules, except that .m.rule.master stays
   * ahead of every override; `before` or `after` name another rule to place it by.
   */
  async put(userId: string, kind: PushRuleKind, ruleId: string, given: NewPushRule, place: { before?: string; after?: string } = {}): Promise<void> {
    if (ruleId.startsWith('.')) throw new UsersError(400, 'M_INVALID_PARAM', 'cannot add a rule whose ID starts with "."');
    if (kind === 'content' && given.pattern === undefined) throw new UsersError(400, 'M_BAD_JSON', 'content rules need a pattern');
    await this.edit(userId, (rules) => {
      const rule: PushRule = { rule_id: ruleId, default: false, enabled: true, actions: given.actions as PushRule['actions'] };
      if (kind === 'override' || kind === 'underride') rule.conditions = (given.conditions ?? []) as unknown as PushRule['conditions'];
      if (kind === 'content') rule.pattern = given.pattern!;
      if (kind === 'room') rule.conditions = [{ kind: 'event_match', key: 'room_id', pattern: ruleId }];
      if (kind === 'sender') rule.conditions = [{ kind: 'event_match', key: 'user_id', pattern: ruleId }];
      const list = rules[kind].filter((r) => r.rule_id !== ruleId);
      const firstOwn = list.findIndex((r) => !r.default);
      const firstDefault = list.findIndex((r) => r.default && r.rule_id !== '.m.rule.master');
      let index = firstOwn !== -1 ? firstOwn : firstDefault !== -1 ? firstDefault : list.length;
      if (place.before) index = list.findIndex((r) => r.rule_id === place.before);
      if (place.after) index = list.findIndex((r) => r.rule_id === place.after) + 1;
      if (index < 0 || (place.after && index === 0)) throw new UsersError(404, 'M_NOT_FOUND', 'before/after rule not found');
      list.splice(index, 0, rule);
      rules[kind] = list;
    });
  }

  /** Deletes one of the user's own rules; the server-default rules stay. */
  async delete(userId: string, kind: PushRuleKind, ruleId: string): Promise<void> {
    await this.edit(userId, (rules) => {
      if (findRule(rules, kind, ruleId).default) throw new UsersError(403, 'M_FORBIDDEN', 'Server-default rules cannot be deleted');
      rules[kind] = rules[kind].filter((r) => r.rule_id !== ruleId);
    });
  }

  /** Turns a rule on or off, or changes its actions, default rules included. */
  async set(userId: string, kind: PushRuleKind, ruleId: string, change: { enabled: boolean } | { actions: unknown[] }): Promise<void> {
    await this.edit(userId, (rules) => void Object.assign(findRule(rules, kind, ruleId), change));
  }

  /**
   * Copies a user's push rules for one room to another (a room upgrade): the room rule
   * named after it and any override or underride rule matching only its room ID.
   */
  async copyForRoom(userId: string, fromRoomId: string, toRoomId: string): Promise<void> {
    type Rule = { rule_id: string; conditions?: { kind?: string; key?: string; pattern?: string }[] } & Record<string, unknown>;
    const forRoom = (rule: Rule) => rule.rule_id === fromRoomId || (rule.conditions?.length === 1 && rule.conditions[0]!.key === 'room_id' && rule.conditions[0]!.pattern === fromRoomId);
    const moved = (rule: Rule): Rule => ({
      ...rule,
      rule_id: rule.rule_id === fromRoomId ? toRoomId : `${rule.rule_id}-${toRoomId}`,
      ...(rule.conditions ? { conditions: rule.conditions.map((c) => (c.key === 'room_id' && c.pattern === fromRoomId ? { ...c, pattern: toRoomId } : c)) } : {}),
    });
    const current = await this.accountData.get(userId, '', PUSH_RULES_TYPE);
    const global = current?.['global'] as Record<string, Rule[]> | undefined;
    if (!global || !Object.values(global).some((rules) => Array.isArray(rules) && rules.some((r) => !r['default'] && forRoom(r)))) return;
    await this.accountData.update<{ global: Record<string, Rule[]> }>(userId, '', PUSH_RULES_TYPE, (data) => {
      const rules = { ...(data?.global ?? {}) };
      for (const [kind, list] of Object.entries(rules)) {
        if (!Array.isArray(list)) continue;
        // Each copy goes just before its original, so it keeps the same place among the rules.
        rules[kind] = list.flatMap((rule) => {
          if (rule['default'] || !forRoom(rule)) return [rule];
          const copy = moved(rule);
          return list.some((r) => r.rule_id === copy.rule_id) ? [rule] : [copy, rule];
        });
      }
      return { ...(data ?? {}), global: rules };
    });
  }

  private async edit(userId: string, change: (rules: PushRuleset) => void): Promise<void> {
    await this.accountData.update<StoredRules>(userId, '', PUSH_RULES_TYPE, (current) => {
      const global = structuredClone(current!.global);
      change(global);
      return { global };
    });
  }
}

function findRule(rules: PushRuleset, kind: PushRuleKind, ruleId: string): PushRule {
  const rule = rules[kind].find((r) => r.rule_id === ruleId);
  if (!rule) throw new UsersError(404, 'M_NOT_FOUND', 'Push rule not found');
  return rule;
}
