import type { JsonObject, JsonValue } from '../crypto/canonical-json.ts';
import type { RoomVersion } from './room-versions.ts';

// The redaction algorithm (spec: rooms/fragments/v1-, v6-, v9-, v11-redactions and rooms/v8).

const TOP_LEVEL_V1 = new Set([
  'event_id', 'type', 'room_id', 'sender', 'state_key', 'content', 'hashes', 'signatures',
  'depth', 'prev_events', 'prev_state', 'auth_events', 'origin', 'origin_server_ts', 'membership',
]);
const TOP_LEVEL_V11 = new Set([...TOP_LEVEL_V1].filter((k) => !['origin', 'membership', 'prev_state'].includes(k)));

const POWER_LEVELS_KEYS = ['ban', 'events', 'events_default', 'kick', 'redact', 'state_default', 'users', 'users_default'];

function keptContent(type: string, content: JsonObject, rules: RoomVersion['redaction']): JsonObject {
  const pick = (...keys: string[]): JsonObject => {
    const out: JsonObject = {};
    for (const k of keys) if (Object.hasOwn(content, k)) out[k] = content[k]!;
    return out;
  };
  const atLeast = (r: RoomVersion['redaction']): boolean => ORDER.indexOf(rules) >= ORDER.indexOf(r);
  switch (type) {
    case 'm.room.member': {
      const out = atLeast('v9') ? pick('membership', 'join_authorised_via_users_server') : pick('membership');
      const invite = content['third_party_invite'];
      if (atLeast('v11') && isObject(invite) && Object.hasOwn(invite, 'signed')) {
        out['third_party_invite'] = { signed: invite['signed']! };
      }
      return out;
    }
    case 'm.room.create':
      return atLeast('v11') ? { ...content } : pick('creator');
    case 'm.room.join_rules':
      return atLeast('v8') ? pick('join_rule', 'allow') : pick('join_rule');
    case 'm.room.power_levels':
      return atLeast('v11') ? pick(...POWER_LEVELS_KEYS, 'invite') : pick(...POWER_LEVELS_KEYS);
    case 'm.room.aliases':
      return atLeast('v6') ? {} : pick('aliases');
    case 'm.room.history_visibility':
      return pick('history_visibility');
    case 'm.room.redaction':
      return atLeast('v11') ? pick('redacts') : {};
    default:
      return {};
  }
}

const ORDER: RoomVersion['redaction'][] = ['v1', 'v6', 'v8', 'v9', 'v11'];

function isObject(value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Returns the redacted form of an event. `content` is always present (`{}` when
 * nothing is kept): signatures are computed over that form, so leaving it out
 * breaks verification.
 */
export function redactEvent<T extends object>(event: T, version: Pick<RoomVersion, 'redaction'>): JsonObject {
  const source = event as unknown as JsonObject;
  const topLevel = version.redaction === 'v11' ? TOP_LEVEL_V11 : TOP_LEVEL_V1;
  const out: JsonObject = {};
  for (const key of Object.keys(source)) {
    if (topLevel.has(key) && key !== 'content') out[key] = source[key]!;
  }
  const content = source['content'];
  const type = source['type'];
  out['content'] = isObject(content) && typeof type === 'string' ? keptContent(type, content, version.redaction) : {};
  return out;
}
