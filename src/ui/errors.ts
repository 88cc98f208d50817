/** Errors in words a person can act on, never a bare code: the page's sentences for what went wrong. */
import { DirectTargetUnknown, FileTooLarge, MatrixApiError, MessageTooLarge } from './chat.ts';
import { formatBytes } from './dom.ts';
import { serverOf, shortServerName, shortUserId } from './ids.ts';

/** "event exceeds 65536 bytes" → "Event exceeds 65536 bytes." */
export function sentence(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return 'Something went wrong.';
  return trimmed[0]!.toUpperCase() + trimmed.slice(1) + (/[.!?]$/.test(trimmed) ? '' : '.');
}

/** An error in words a person can act on, never a bare code. */
export function describeError(error: unknown): string {
  if (error instanceof MatrixApiError) {
    const words: Record<string, string> = {
      M_USER_IN_USE: 'That username is taken. Choose another, or sign in to it.',
      M_INVALID_USERNAME: 'Usernames may use only the letters a\u2013z, digits and . _ = - /.',
      M_EXCLUSIVE: 'That username is reserved. Choose another.',
      M_LIMIT_EXCEEDED: 'Too many attempts in a short time. Wait a moment and try again.',
      M_TOO_LARGE: 'This is too large for the homeserver to accept.',
      M_UNKNOWN_TOKEN: 'You were signed out. Sign in again.',
      M_WEAK_PASSWORD: 'That password is too weak. Choose a longer one.',
    };
    if (words[error.errcode]) return words[error.errcode]!;
    if (error.status === 502 || error.status === 504) return 'The other server could not be reached: it is offline, or not known to any of your peers yet.';
    if (error.status === 503) return 'Your homeserver is busy starting or moving to another tab. Try again in a moment.';
    return sentence(error.message);
  }
  // fetch itself failed: the service worker or the core is not answering.
  if (error instanceof TypeError) return 'Could not reach your homeserver in this browser. Try again in a moment.';
  return sentence(error instanceof Error ? error.message : String(error));
}

/** A sign-in or account creation that failed. */
export function describeAccountError(error: unknown, mode: 'register' | 'login'): string {
  return mode === 'login' && error instanceof MatrixApiError && error.errcode === 'M_FORBIDDEN' ? 'Wrong username or password.' : describeError(error);
}

/** A join that failed, said plainly: most often the room's server cannot be reached or does not know the room. */
export function describeJoinError(error: unknown, target: string): string {
  const server = target.includes(':') ? serverOf(target) : '';
  if (error instanceof MatrixApiError && (error.status === 502 || error.status === 504)) {
    return `Could not reach the server of ${target.replace(server, shortServerName(server))}: it is offline or not found yet. You have not joined.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_NOT_FOUND') {
    // A remote alias that does not resolve: its server has none such, or could not be asked; the core cannot tell which.
    return `No room ${target.replace(server, shortServerName(server))} was found: its server has no such room, or could not be reached. You have not joined.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_FORBIDDEN') return `You may not join ${target}: you need an invite. ${sentence(error.message)}`;
  return `Could not join: ${describeError(error)}`;
}

/** An invite failure in words: most often the invitee's server is not reachable (a 502 from ours). */
export function describeInviteError(error: unknown, userId: string): string {
  if (error instanceof MatrixApiError && error.status === 502) {
    return `Could not reach the server of ${shortUserId(userId)}: it is offline or not found yet. Try again once it is listed under Peers.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_INVALID_PARAM') return `\u201c${userId}\u201d is not a Matrix ID (it looks like @name:server).`;
  if (error instanceof MatrixApiError && error.errcode === 'M_NOT_FOUND') return `No user ${shortUserId(userId)} was found. Check the ID. Nobody was invited.`;
  return `Could not invite ${shortUserId(userId)}: ${describeError(error)}`;
}

/** A direct chat not started, and why; nothing was created. */
export function describeDirectError(error: unknown, userId: string): string {
  const cause = error instanceof DirectTargetUnknown ? error.cause : error;
  if (cause instanceof MatrixApiError && (cause.status === 502 || cause.status === 504)) {
    return `Could not reach the server of ${shortUserId(userId)}: it is offline or not found yet. Nothing was created; try again once it is listed under Peers.`;
  }
  if (cause instanceof MatrixApiError && cause.errcode === 'M_NOT_FOUND') return `No user ${shortUserId(userId)} was found. Check the ID. Nothing was created.`;
  if (cause instanceof MatrixApiError && cause.errcode === 'M_INVALID_PARAM') return notAMatrixId(userId);
  return `Could not start a chat with ${shortUserId(userId)}: ${describeError(cause)}`;
}

/** What a mistyped Matrix ID is told. */
export function notAMatrixId(text: string): string {
  return `\u201c${text}\u201d is not a Matrix ID: it looks like @name:server. Nothing was created.`;
}

/** Why a message was not sent (shown beside Retry and Delete). */
export function describeSendError(error: unknown): string {
  if (error === undefined) return 'Not sent.';
  if (error instanceof MessageTooLarge) {
    return `Message too large: it is ${formatBytes(error.size)}, and a message can be at most ${formatBytes(error.limit)}. Shorten it or split it.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_TOO_LARGE') return 'Message too large: the homeserver refused it. Shorten it or split it.';
  return `Not sent. ${describeError(error)}`;
}

/** Why a file was not uploaded (shown beside Retry and Delete). */
export function describeUploadError(error: unknown): string {
  if (error instanceof FileTooLarge) {
    const limit = error.limit === undefined ? 'the homeserver refused a file this large' : `your homeserver takes files of at most ${formatBytes(error.limit)}`;
    return `File too large: it is ${formatBytes(error.size)}, and ${limit}.`;
  }
  if (error instanceof MatrixApiError && error.errcode === 'M_FORBIDDEN') return `Not uploaded: the homeserver refused it. ${sentence(error.message)}`;
  return `Not uploaded. ${describeError(error)}`;
}
