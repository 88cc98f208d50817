import type { Session } from '../chat.ts';

/** The signed-in session, kept for every tab of the origin (a tab follows another's sign-in and sign-out). */
export const SESSION_KEY = 'hearth-session';

export function loadSession(): Session | undefined {
  try {
    const raw = localStorage.getItem(SESSION_KEY);
    return raw ? (JSON.parse(raw) as Session) : undefined;
  } catch {
    return undefined;
  }
}

export function saveSession(session: Session | undefined): void {
  if (session) localStorage.setItem(SESSION_KEY, JSON.stringify(session));
  else localStorage.removeItem(SESSION_KEY);
}
