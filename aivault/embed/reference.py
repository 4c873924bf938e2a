"""A plain numpy forward pass of the BERT encoder, independent of llama.cpp and of the converter.

It exists to check the converter: the vectors in ``tests/fixtures/embed/reference.json`` were
computed once by this module from the safetensors weights, in float64, following the
sentence-transformers recipe of all-MiniLM-L6-v2 (BERT WordPiece tokenizer, lower-casing and
accent stripping, at most 256 tokens with [CLS] and [SEP], mean pooling over the tokens, L2
normalisation). The test embeds the same texts through the converted GGUF and llama.cpp and
compares. Slow (pure numpy), never on the search or indexing path.

Regenerate the fixture (only when the reference texts change):

    python -m aivault.embed.reference --out tests/fixtures/embed/reference.json
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import unicodedata
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from aivault.embed.models import DEFAULT_MODEL, ModelSpec, get_model, source_files

F64 = npt.NDArray[np.float64]

REFERENCE_TEXTS = (
    "the tests hang because the event loop is closed",
    "pytest freezes waiting on asyncio",
    "how to bake sourdough bread",
    "DuckDB could not set lock on file: another process holds it (Conflicting lock is held)",
    "Refactor resolveTerminalPath() to handle ~/src/api symlinks; see PR #412.",
    "Café naïve résumé — ÉCOLE, über straße",
    # ~480 WordPiece tokens: checks that long texts are cut to the model's 256 like sentence-transformers does.
    " ".join(f"step {i}: retry the flaky integration test after the deploy" for i in range(48)),
)

_MAX_CHARS_PER_WORD = 100  # longer words become [UNK], as in BERT's WordPiece


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # BERT counts every non-alphanumeric ASCII symbol ($, ^, `, ...) as punctuation.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    """BERT's uncased tokenizer: basic splitting, then greedy longest-match WordPiece."""

    def __init__(self, vocab: list[str]) -> None:
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.cls = self.ids["[CLS]"]
        self.sep = self.ids["[SEP]"]
        self.unk = self.ids["[UNK]"]

    def _basic(self, text: str) -> list[str]:
        cleaned: list[str] = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or _is_control(ch):
                continue
            if _is_cjk(cp):
                cleaned.extend((" ", ch, " "))
            elif _is_whitespace(ch):
                cleaned.append(" ")
            else:
                cleaned.append(ch)
        words: list[str] = []
        for word in "".join(cleaned).split():
            # Uncased model: lower-case, then strip accents (NFD, drop combining marks).
            word = "".join(c for c in unicodedata.normalize("NFD", word.lower()) if unicodedata.category(c) != "Mn")
            current: list[str] = []
            for ch in word:
                if _is_punctuation(ch):
                    if current:
                        words.append("".join(current))
                        current = []
                    words.append(ch)
                else:
                    current.append(ch)
            if current:
                words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> list[int]:
        if len(word) > _MAX_CHARS_PER_WORD:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = -1
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.ids:
                    found = self.ids[piece]
                    break
                end -= 1
            if found < 0:
                return [self.unk]
            pieces.append(found)
            start = end
        return pieces

    def encode(self, text: str, max_tokens: int) -> list[int]:
        ids: list[int] = []
        for word in self._basic(text):
            ids.extend(self._wordpiece(word))
        return [self.cls, *ids[: max_tokens - 2], self.sep]


def _layer_norm(x: F64, w: F64, b: F64, eps: float) -> F64:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F64 = (x - mean) / np.sqrt(var + eps) * w + b
    return out


_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: F64) -> F64:
    # The exact (erf) GELU that BERT's "gelu" means, not the tanh approximation.
    erf = np.asarray(_erf(x / math.sqrt(2.0)), dtype=np.float64)
    out: F64 = 0.5 * x * (1.0 + erf)
    return out


class ReferenceModel:
    """The BERT encoder of one allow-listed model, in float64."""

    def __init__(self, spec: ModelSpec) -> None:
        from safetensors.numpy import load_file

        files = source_files(spec)
        self.spec = spec
        self.config: dict[str, Any] = json.loads(files["config.json"].read_text(encoding="utf-8"))
        vocab = files["vocab.txt"].read_text(encoding="utf-8").split("\n")
        if vocab and vocab[-1] == "":
            vocab.pop()
        self.tokenizer = WordPiece(vocab)
        raw = load_file(str(files["model.safetensors"]))
        self.w = {k.removeprefix("bert."): v.astype(np.float64) for k, v in raw.items() if v.dtype.kind == "f"}

    def forward(self, ids: list[int]) -> F64:
        w = self.w
        cfg = self.config
        eps = float(cfg["layer_norm_eps"])
        n_heads = int(cfg["num_attention_heads"])
        n = len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        d = x.shape[1] // n_heads
        for layer in range(int(cfg["num_hidden_layers"])):
            pre = f"encoder.layer.{layer}."

            def lin(v: F64, name: str, pre: str = pre) -> F64:
                out: F64 = v @ w[pre + name + ".weight"].T + w[pre + name + ".bias"]
                return out

            q = lin(x, "attention.self.query").reshape(n, n_heads, d).transpose(1, 0, 2)
            k = lin(x, "attention.self.key").reshape(n, n_heads, d).transpose(1, 0, 2)
            v = lin(x, "attention.self.value").reshape(n, n_heads, d).transpose(1, 0, 2)
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = (scores @ v).transpose(1, 0, 2).reshape(n, n_heads * d)
            x = _layer_norm(x + lin(ctx, "attention.output.dense"), w[pre + "attention.output.LayerNorm.weight"],
                            w[pre + "attention.output.LayerNorm.bias"], eps)
            h = lin(_gelu(lin(x, "intermediate.dense")), "output.dense")
            x = _layer_norm(x + h, w[pre + "output.LayerNorm.weight"], w[pre + "output.LayerNorm.bias"], eps)
        # A single unpadded text: the attention mask is all ones, so mean pooling is a plain mean.
        pooled = x.mean(axis=0)
        out: F64 = pooled / np.linalg.norm(pooled)
        return out

    def embed(self, text: str) -> F64:
        return self.forward(self.tokenizer.encode(text, self.spec.max_tokens))


def write_fixture(out: Path, model_name: str = DEFAULT_MODEL) -> None:
    spec = get_model(model_name)
    model = ReferenceModel(spec)
    entries = []
    for text in REFERENCE_TEXTS:
        ids = model.tokenizer.encode(text, spec.max_tokens)
        vec = model.forward(ids)
        entries.append({"text": text, "token_ids": ids, "vector": [round(float(x), 8) for x in vec]})
    doc = {
        "model": spec.name,
        "package": f"{spec.package}=={spec.package_version}",
        "how": ("aivault.embed.reference: numpy float64 BERT forward pass over the package's safetensors, "
                "WordPiece (uncased, accents stripped), [CLS] text [SEP] <= 256 tokens, mean pooling, "
                "L2 normalisation; regenerate with `python -m aivault.embed.reference --out <this file>`"),
        "dims": spec.dims,
        "texts": entries,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="where to write the reference vectors (JSON)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args(argv)
    write_fixture(args.out, args.model)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
