// The demo page's WordPiece tokenizer gives the same ids as the model's own tokenizer
// (HF tokenizers in Python, recorded by tests/fixgen/gen_similarity.py).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './helpers.mjs';
import { route } from '../../scripts/serve.mjs';
import { WordPiece } from '../../www/wordpiece.js';

const expected = path.join(ROOT, '.cache', 'models', 'minilm.similarity.json');
const required = process.env.PT2WEB_REQUIRE_MODELS === '1';

test('WordPiece ids match the model tokenizer', (t) => {
  const tokFile = route('/models/tokenizer.json');
  if (!existsSync(expected) || !tokFile) {
    assert.ok(!required, 'PT2WEB_REQUIRE_MODELS=1 but the MiniLM expectations are missing (scripts/build_models.sh)');
    t.skip('no .cache/models/minilm.similarity.json (scripts/build_models.sh)');
    return;
  }
  const want = JSON.parse(readFileSync(expected, 'utf8'));
  const wp = new WordPiece(JSON.parse(readFileSync(tokFile, 'utf8')));
  want.sentences.forEach((s, i) => assert.deepEqual(wp.encode(s), want.input_ids[i], s));
});
