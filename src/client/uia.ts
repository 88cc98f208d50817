import { encodeBase64 } from '../crypto/base64.ts';
import { canonicalJson, utf8 } from '../crypto/canonical-json.ts';
import { randomToken, type RandomBytes } from '../crypto/random.ts';
import { sha256 } from '../crypto/sha256.ts';
import { MatrixError } from '../http/matrix-error.ts';

/** A short digest of what an operation would do, to bind a UIA session to it (kept in memory, never the values). */
export function operationDigest(request: unknown): string {
  return encodeBase64(sha256(utf8(canonicalJson(request)))).slice(0, 22);
}

export interface AuthFlow {
  stages: string[];
}

/** The 401 that asks a client to complete user-interactive auth (client-server §User-interactive authentication API). */
export class UiaRequired extends MatrixError {
  constructor(
    readonly body: { flows: AuthFlow[]; params: Record<string, unknown>; session: string; completed?: string[] },
    failure?: { errcode: string; error: string },
  ) {
    super(401, failure?.errcode ?? 'M_FORBIDDEN', failure?.error ?? 'Additional authentication is required');
    this.failure = failure;
  }
  private readonly failure: { errcode: string; error: string } | undefined;

  override toJSON(): Record<string, unknown> {
    return { ...this.body, ...(this.failure ?? {}) };
  }
}

/** Checks one stage's auth dict; true when the stage is complete. */
export type StageCheck = (stage: string, auth: Record<string, unknown>) => Promise<boolean>;

interface UiaSession {
  completed: Set<string>;
  created: number;
  /** What the session was started for, so a session cannot be replayed for another request. */
  purpose: string;
}

const SESSION_LIFETIME_MS = 15 * 60 * 1000;

export class UserInteractiveAuth {
  private readonly sessions = new Map<string, UiaSession>();

  constructor(
    private readonly random: RandomBytes,
    private readonly now: () => number,
  ) {}

  /**
   * Returns when the request's `auth` completes one of the flows; otherwise throws
   * UiaRequired. A stage may be completed without a session ID (clients often send
   * m.login.dummy to /register that way): a new session is made for it.
   */
  async authenticate(
    purpose: string,
    auth: unknown,
    flows: AuthFlow[],
    check: StageCheck,
  ): Promise<void> {
    this.expire();
    const authDict = typeof auth === 'object' && auth !== null ? (auth as Record<string, unknown>) : undefined;
    const sessionId = typeof authDict?.['session'] === 'string' ? (authDict['session'] as string) : undefined;
    let session = sessionId ? this.sessions.get(sessionId) : undefined;
    // A session completes the operation that started it: another one (other devices to delete,
    // another new password) within it is refused, as Synapse does, not silently restarted.
    if (session && session.purpose !== purpose) throw new MatrixError(403, 'M_FORBIDDEN', 'The requested operation changed during the user-interactive auth session');
    const id = session ? sessionId! : randomToken(this.random, 18);
    if (!session) {
      session = { completed: new Set(), created: this.now(), purpose };
      this.sessions.set(id, session);
    }
    const body = () => ({ flows, params: {}, session: id, completed: [...session!.completed] });

    const stage = typeof authDict?.['type'] === 'string' ? (authDict['type'] as string) : undefined;
    if (stage) {
      if (!flows.some((f) => f.stages.includes(stage))) {
        throw new UiaRequired(body(), { errcode: 'M_UNRECOGNIZED', error: `unknown auth stage ${stage}` });
      }
      if (!(await check(stage, authDict!))) throw new UiaRequired(body(), { errcode: 'M_FORBIDDEN', error: 'Invalid credentials' });
      session.completed.add(stage);
    }
    if (flows.some((f) => f.stages.every((s) => session!.completed.has(s)))) {
      this.sessions.delete(id);
      return;
    }
    throw new UiaRequired(body());
  }

  private expire(): void {
    const cutoff = this.now() - SESSION_LIFETIME_MS;
    for (const [id, session] of this.sessions) if (session.created < cutoff) this.sessions.delete(id);
  }
}
