const enc = encodeURIComponent;

export const MAILBOX_PREFIX = '/_hearth/mailbox/v1';
export const lettersPath = (destination: string) => `${MAILBOX_PREFIX}/letters/${enc(destination)}`;
export const depositPath = (destination: string, txnId: string) => `${lettersPath(destination)}/${enc(txnId)}`;
export const NOTIFY_PATH = `${MAILBOX_PREFIX}/notify`;
