// The archive cache of `load(url, { cache })`: an archive fetched once is kept in the browser's
// Cache API (or, where a page has none, the origin private file system), keyed by its URL and
// remembered with the ETag, Last-Modified and size the server gave. A later load asks the
// server with one HEAD request whether those still hold and then reads the bytes from the
// cache, never from the network; a changed archive is downloaded again and replaces the entry.
// The stores share one small interface (get/put/delete/clear). A hit gives the bytes as a Blob
// (`hit.blob()`, backed by the store's file, not read into memory), so `load` streams a cached
// archive by slices as it streams one from the network by range requests; `put` takes bytes
// or a ReadableStream of them (a streamed download written as it arrives).

const STORE_NAME = 'pt2web-archives-v1';

/** What identifies one version of an archive at its URL. */
export function versionOf(headers, size) {
  return { etag: headers.get('etag'), lastModified: headers.get('last-modified'), size };
}

// Whether the server still serves the version cached: every validator it sends must equal the
// cached one, and it must send at least one of ETag and Last-Modified or a size.
function sameVersion(cached, headers) {
  const now = versionOf(headers, Number(headers.get('content-length') ?? NaN));
  let checked = false;
  for (const k of ['etag', 'lastModified']) {
    if (now[k] === null && cached[k] === null) continue;
    if (now[k] !== cached[k]) return false;
    checked = true;
  }
  if (Number.isFinite(now.size)) {
    if (now.size !== cached.size) return false;
    checked = true;
  }
  return checked;
}

/** The Cache API store: one Response per URL, its version in `x-pt2web-*` headers. */
class CacheApiStore {
  kind = 'cache-api';
  static available() { return typeof globalThis.caches?.open === 'function'; }
  #open() { return globalThis.caches.open(STORE_NAME); }
  async get(url) {
    const r = await (await this.#open()).match(url);
    if (!r) return null;
    const h = r.headers;
    const version = { etag: h.get('x-pt2web-etag'), lastModified: h.get('x-pt2web-last-modified'), size: Number(h.get('x-pt2web-size')) };
    return { version, body: r, blob: () => r.blob() };
  }
  async put(url, version, bytes) {
    const headers = { 'content-type': 'application/octet-stream', 'x-pt2web-size': String(version.size) };
    if (version.etag !== null) headers['x-pt2web-etag'] = version.etag;
    if (version.lastModified !== null) headers['x-pt2web-last-modified'] = version.lastModified;
    await (await this.#open()).put(url, new Response(bytes, { headers }));
  }
  async delete(url) { return (await this.#open()).delete(url); }
  async clear() { return globalThis.caches.delete(STORE_NAME); }
}

/** The origin private file system store: `<sha-256 of the URL>.pt2` and its `.json` version. */
class OpfsStore {
  kind = 'opfs';
  static available() {
    return typeof globalThis.navigator?.storage?.getDirectory === 'function' && !!globalThis.crypto?.subtle
      && typeof globalThis.FileSystemFileHandle?.prototype?.createWritable === 'function';
  }
  async #dir() { return (await navigator.storage.getDirectory()).getDirectoryHandle(STORE_NAME, { create: true }); }
  async #name(url) {
    const d = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(url)));
    return Array.from(d, (b) => b.toString(16).padStart(2, '0')).join('');
  }
  async #read(dir, name) {
    try { return await (await dir.getFileHandle(name)).getFile(); } catch { return null; }
  }
  async #write(dir, name, data) {
    const w = await (await dir.getFileHandle(name, { create: true })).createWritable();
    if (data instanceof ReadableStream) {
      await data.pipeTo(w); // closes `w`, or aborts it (nothing written) when `data` errors
      return;
    }
    await w.write(data);
    await w.close();
  }
  async get(url) {
    const dir = await this.#dir();
    const name = await this.#name(url);
    const meta = await this.#read(dir, `${name}.json`);
    const file = await this.#read(dir, `${name}.pt2`);
    if (!meta || !file) return null;
    const { url: stored, ...version } = JSON.parse(await meta.text());
    if (stored !== url) return null;
    return { version, body: new Response(file.stream(), { headers: { 'content-length': String(file.size) } }), blob: async () => file };
  }
  async put(url, version, bytes) {
    const dir = await this.#dir();
    const name = await this.#name(url);
    // The version is written last: an interrupted write leaves no entry that looks complete.
    await dir.removeEntry(`${name}.json`).catch(() => {});
    await this.#write(dir, `${name}.pt2`, bytes);
    await this.#write(dir, `${name}.json`, JSON.stringify({ url, ...version }));
  }
  async delete(url) {
    const dir = await this.#dir();
    const name = await this.#name(url);
    let found = false;
    for (const f of [`${name}.json`, `${name}.pt2`]) {
      found = (await dir.removeEntry(f).then(() => true, () => false)) || found;
    }
    return found;
  }
  async clear() {
    const root = await navigator.storage.getDirectory();
    return root.removeEntry(STORE_NAME, { recursive: true }).then(() => true, () => false);
  }
}

const STORES = { 'cache-api': CacheApiStore, opfs: OpfsStore };

/**
 * The store for a `cache` option: 'auto' takes the Cache API where the context has one (pages
 * and Workers of secure origins), else the origin private file system, else none; 'cache-api'
 * and 'opfs' name one (null when unavailable); 'none' none.
 */
export function storeFor(mode) {
  if (mode === 'none') return null;
  if (mode === 'auto') {
    const S = Object.values(STORES).find((s) => s.available());
    return S ? new S() : null;
  }
  const S = STORES[mode];
  return S?.available() ? new S() : null;
}

/** Every store this context has (for `clearCache`). */
export function allStores() {
  return Object.values(STORES).filter((s) => s.available()).map((S) => new S());
}

/**
 * The cached bytes' Response when the server still serves that version (a HEAD request), else
 * null (and the stale entry removed). Without a network (the HEAD request fails) the cached
 * copy is used as it is.
 */
export async function cachedResponse(store, url) {
  const hit = await store.get(url);
  if (!hit) return null;
  let head = null;
  try {
    head = await fetch(url, { method: 'HEAD', cache: 'no-store' });
  } catch {
    return hit;
  }
  if (head.ok && sameVersion(hit.version, head.headers)) return hit;
  await store.delete(url);
  return null;
}
