/**
 * The Rust crypto's IndexedDB store, which matrix-js-sdk names with a fixed prefix (one per origin).
 *
 * A stopped client leaves its connection to that store open: it closes only when the garbage collector
 * frees the crypto's objects that still refer to it (after a verification, 21 s in Chromium, measured).
 * Until then the store cannot be deleted, and a sign-in after a sign-out, whose new device needs it empty
 * (`clearStores`), waited that long with no encryption. So every connection to it closes as soon as
 * another asks to delete or upgrade the database (`versionchange`), as the IndexedDB spec asks of a
 * connection; matrix-js-sdk 37 sets no such handler, nor lets the page choose another store name.
 */
const CRYPTO_STORE_PREFIX = 'matrix-js-sdk::';

const PATCHED = Symbol.for('hearth.cryptoStoreYields');

export function letCryptoStoreBeDeleted(factory: IDBFactory | undefined = globalThis.indexedDB): void {
  if (!factory || (factory as IDBFactory & { [PATCHED]?: true })[PATCHED]) return;
  const open = factory.open.bind(factory);
  factory.open = (name: string, version?: number) => {
    const request = version === undefined ? open(name) : open(name, version);
    if (name.startsWith(CRYPTO_STORE_PREFIX)) {
      request.addEventListener('success', () => {
        const database = request.result;
        database.addEventListener('versionchange', () => database.close());
      });
    }
    return request;
  };
  (factory as IDBFactory & { [PATCHED]?: true })[PATCHED] = true;
}
