"""Expected values for the demo page's sentence similarity (all-MiniLM-L6-v2, real weights).

    .venv/bin/python tests/fixgen/gen_similarity.py [--out .cache/models]

Writes minilm.similarity.json: for a few sentences, the token ids of the model's own
tokenizer (HF tokenizers, tokenizer.json) without padding, and the cosine similarity matrix of
mean-pooled, L2-normalised embeddings from eager PyTorch (transformers BertModel) — what the
demo page computes in the browser with pt2web.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_models import minilm_dir  # noqa: E402

SENTENCES = [
    "pt2web runs PyTorch programs in the browser.",
    "PyTorch models exported with torch.export run on WebGPU.",
    "The weather is lovely today.",
    "Héllo, WORLD!! Tokenizers split punctuation: don't they? 3.14 and naïve café.",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[2] / ".cache" / "models"))
    a = ap.parse_args()
    from transformers import AutoTokenizer, BertModel

    path = minilm_dir()
    tok = AutoTokenizer.from_pretrained(path)
    m = BertModel.from_pretrained(path, attn_implementation="sdpa").eval()
    ids = [tok(s)["input_ids"] for s in SENTENCES]
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        h = m(**enc).last_hidden_state
    mask = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
    emb = (h * mask).sum(1) / mask.sum(1)
    emb = torch.nn.functional.normalize(emb, dim=-1)
    sim = (emb @ emb.T).tolist()
    os.makedirs(a.out, exist_ok=True)
    out = Path(a.out) / "minilm.similarity.json"
    out.write_text(json.dumps({"sentences": SENTENCES, "input_ids": ids, "similarity": sim,
                               "source": "eager BertModel (sdpa), mean pooling, L2 normalised"}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
