// BERT WordPiece tokenizer (all-MiniLM-L6-v2: uncased), driven by the model's tokenizer.json:
// lowercase + strip accents, split on whitespace and punctuation, greedy longest-match
// sub-words with the '##' prefix, [CLS] ... [SEP].
export class WordPiece {
  constructor(tokenizerJson) {
    const m = tokenizerJson.model;
    this.vocab = new Map(Object.entries(m.vocab));
    this.unk = m.unk_token ?? '[UNK]';
    this.prefix = m.continuing_subword_prefix ?? '##';
    this.maxChars = m.max_input_chars_per_word ?? 100;
    const n = tokenizerJson.normalizer ?? {};
    this.lowercase = n.lowercase ?? true;
    this.stripAccents = n.strip_accents ?? this.lowercase;
    this.cls = this.vocab.get('[CLS]');
    this.sep = this.vocab.get('[SEP]');
    this.pad = this.vocab.get('[PAD]') ?? 0;
  }

  static isPunct(ch) {
    const c = ch.codePointAt(0);
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return true;
    return /\p{P}/u.test(ch);
  }

  static isCjk(c) {
    return (c >= 0x4e00 && c <= 0x9fff) || (c >= 0x3400 && c <= 0x4dbf) || (c >= 0x20000 && c <= 0x2a6df)
      || (c >= 0x2a700 && c <= 0x2b73f) || (c >= 0x2b740 && c <= 0x2b81f) || (c >= 0x2b820 && c <= 0x2ceaf)
      || (c >= 0xf900 && c <= 0xfaff) || (c >= 0x2f800 && c <= 0x2fa1f);
  }

  normalize(text) {
    let t = '';
    for (const ch of text) {
      const c = ch.codePointAt(0);
      if (c === 0 || c === 0xfffd || (/\p{Cc}/u.test(ch) && !/\s/.test(ch))) continue;
      t += /\s/.test(ch) ? ' ' : WordPiece.isCjk(c) ? ` ${ch} ` : ch;
    }
    if (this.lowercase) t = t.toLowerCase();
    if (this.stripAccents) t = t.normalize('NFD').replace(/\p{Mn}/gu, '');
    return t;
  }

  words(text) {
    const out = [];
    for (const w of this.normalize(text).split(' ')) {
      let cur = '';
      for (const ch of w) {
        if (WordPiece.isPunct(ch)) {
          if (cur) out.push(cur);
          out.push(ch);
          cur = '';
        } else cur += ch;
      }
      if (cur) out.push(cur);
    }
    return out;
  }

  wordIds(word) {
    const chars = Array.from(word);
    if (chars.length > this.maxChars) return [this.vocab.get(this.unk)];
    const ids = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let id;
      while (start < end) {
        const piece = (start > 0 ? this.prefix : '') + chars.slice(start, end).join('');
        if (this.vocab.has(piece)) { id = this.vocab.get(piece); break; }
        end--;
      }
      if (id === undefined) return [this.vocab.get(this.unk)];
      ids.push(id);
      start = end;
    }
    return ids;
  }

  /** Token ids with [CLS]/[SEP], truncated to maxLen. */
  encode(text, maxLen = 512) {
    const ids = [this.cls];
    for (const w of this.words(text)) ids.push(...this.wordIds(w));
    ids.length = Math.min(ids.length, maxLen - 1);
    ids.push(this.sep);
    return ids;
  }

  /** A padded batch as BigInt64Array tensors {input_ids, token_type_ids, attention_mask}. */
  batch(texts, maxLen = 512) {
    const enc = texts.map((t) => this.encode(t, maxLen));
    const seq = Math.max(2, ...enc.map((e) => e.length));
    const n = texts.length;
    const ids = new BigInt64Array(n * seq).fill(BigInt(this.pad));
    const mask = new BigInt64Array(n * seq);
    enc.forEach((e, i) => e.forEach((id, j) => { ids[i * seq + j] = BigInt(id); mask[i * seq + j] = 1n; }));
    const shape = [n, seq];
    return {
      input_ids: { data: ids, shape },
      token_type_ids: { data: new BigInt64Array(n * seq), shape },
      attention_mask: { data: mask, shape },
    };
  }
}

/** Mean pooling over the attention mask, then L2 normalisation (sentence-transformers). */
export function meanPool(hidden, mask) {
  const [n, seq, dim] = hidden.shape;
  const out = [];
  for (let i = 0; i < n; i++) {
    const v = new Float64Array(dim);
    let count = 0;
    for (let j = 0; j < seq; j++) {
      if (!mask.data[i * seq + j]) continue;
      count++;
      const base = (i * seq + j) * dim;
      for (let k = 0; k < dim; k++) v[k] += hidden.data[base + k];
    }
    let norm = 0;
    for (let k = 0; k < dim; k++) { v[k] /= Math.max(count, 1); norm += v[k] * v[k]; }
    norm = Math.sqrt(norm) || 1;
    out.push(v.map((x) => x / norm));
  }
  return out;
}

export function cosineMatrix(emb) {
  return emb.map((a) => emb.map((b) => a.reduce((s, x, k) => s + x * b[k], 0)));
}
