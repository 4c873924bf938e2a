"""Local embeddings: the converted GGUF run by llama.cpp (llama-cpp-python), fully offline.

Nothing here touches the network: the weights come from an installed distribution, the GGUF
is converted on first use into the caller's models directory, and llama.cpp reads that local
file. ``HF_HUB_OFFLINE=1`` is set as a belt and braces for any library that might look.

Batching. BERT attention is not causal, so llama.cpp needs every text whole inside one
micro-batch; the context is therefore sized for the longest allowed text (``max_tokens``,
256). How many tokens go into one ``llama_decode`` call is a separate knob, ``n_batch``: texts
are packed in order until the next one would exceed it (a text longer than ``n_batch`` goes
alone). Attention runs over the whole pack with a mask dropping cross-text pairs; with flash
attention that stays cheap, so packs of ~256 tokens beat one text per call (DEFAULT_N_BATCH).

Threads. One embedder owns one llama.cpp context, which is not re-entrant: ``embed`` holds a
lock. llama-cpp-python calls llama.cpp through ``ctypes.CDLL``, which releases the GIL for
the duration of each C call, so tokenizing and decoding in a background thread leave the
other threads (DuckDB queries, the RPC loop) running; tests/unit/test_embed.py checks this.
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from aivault.embed.convert import ensure_gguf
from aivault.embed.models import DEFAULT_MODEL, ModelSpec, get_model
from aivault.errors import BackendMissing, EmbedError

# Defaults from measurements on the 2-core machine (200-character texts, ~43 tokens each;
# docs/design.md §7 has the table). With flash attention on, packing several texts per call pays:
# 1 thread did ~42 texts/s at n_batch 32/64 (one text per call), ~67 at 128/256, ~65 at 512.
# 2 threads did ~120-131 at 256 on an idle machine, but llama.cpp's CPU threads sync through
# OpenMP spin barriers: with one other busy process (the daemon also scans, indexes and
# answers searches) 2 threads fell to 4-40 texts/s while 1 thread held 20-67; OMP_WAIT_POLICY=
# PASSIVE stops the collapse but also the gain (2 threads = 1 thread). So: one thread by
# default, which leaves the other core to lexical indexing and search, and a switch to two
# (set_threads) that the background worker makes only while nothing else runs.
DEFAULT_N_BATCH = 256
DEFAULT_N_THREADS = 1
# The background worker may switch to this many threads while nothing else runs (no scan pass,
# no merge, no recent search), and drops back as soon as something does or when two threads
# prove slower than one (another process is busy): measured on real chunks (user/assistant
# text and thinking), 1 thread ~46 texts/s, 2 threads ~85 on the idle 2-core machine.
BOOST_N_THREADS = 2
# Flash attention keeps packed calls linear in their size: 256 tokens in one call took 47 ms
# with it and 80 ms without (2 threads); without it packing more than one text lost speed.
_FLASH_ATTN = True
# Texts are cut to this many characters per allowed token before tokenizing, so a megabyte of
# tool output costs no more than a page (a WordPiece token rarely spans 100 characters).
_CHARS_PER_TOKEN_BOUND = 100

_INSTALL_HINT = ("run ./dev test (it builds llama-cpp-python once, ~4 minutes), or "
                 "CMAKE_BUILD_PARALLEL_LEVEL=2 .venv/bin/python -m pip install llama-cpp-python==0.3.36")


def _import_llama() -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise BackendMissing(
            f"local embeddings need llama-cpp-python, which is not installed: {_INSTALL_HINT}") from None
    return llama_cpp


class LocalEmbedder:
    """An allow-listed model run by llama.cpp; ``embed`` returns L2-normalised float32 rows."""

    def __init__(self, model_name: str = DEFAULT_MODEL, models_dir: Path | str | None = None, *,
                 n_threads: int | None = None, n_batch: int | None = None) -> None:
        spec = get_model(model_name)  # refuse an unknown name before anything is imported or written
        if models_dir is None:
            raise EmbedError("LocalEmbedder needs the models directory (<data dir>/models)")
        n_batch = DEFAULT_N_BATCH if n_batch is None else int(n_batch)
        explicit_threads = n_threads
        n_threads = DEFAULT_N_THREADS if n_threads is None else int(n_threads)
        if n_batch < 8 or n_threads < 1:
            raise EmbedError(f"n_batch must be >= 8 and n_threads >= 1 (got {n_batch}, {n_threads})")
        llama_cpp = _import_llama()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = ensure_gguf(spec.name, models_dir)

        self._spec: ModelSpec = spec
        self._lib = llama_cpp
        self._n_batch = n_batch
        self._n_threads = n_threads
        self._threads_now = n_threads
        # Idle boost (see set_threads): only when the thread count was not configured explicitly.
        self.boost_threads = min(os.cpu_count() or 1, BOOST_N_THREADS) if explicit_threads is None else n_threads
        ctx_tokens = max(n_batch, spec.max_tokens)
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(path), embedding=True, n_ctx=ctx_tokens, n_batch=ctx_tokens, n_ubatch=ctx_tokens,
                n_threads=n_threads, n_threads_batch=n_threads, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
                flash_attn=_FLASH_ATTN, verbose=False)
        except Exception as exc:  # llama-cpp-python raises ValueError/RuntimeError with no detail
            raise EmbedError(f"llama.cpp could not load {path}: {exc}") from None
        n_embd = int(self._llm.n_embd())
        if n_embd != spec.dims:
            raise EmbedError(f"{path} has {n_embd} dimensions, {spec.name} should have {spec.dims}")
        ctx = self._llm.ctx
        self._max_seqs = int(llama_cpp.llama_n_seq_max(ctx))
        vocab = llama_cpp.llama_model_get_vocab(self._llm.model)
        self._sep = int(llama_cpp.llama_vocab_sep(vocab))
        self._batch = llama_cpp.llama_batch_init(ctx_tokens, 0, 1)
        # Frees the batch if the embedder is dropped without close(); holds no reference to self.
        self._free_batch = weakref.finalize(self, llama_cpp.llama_batch_free, self._batch)
        self._lock = threading.Lock()
        self._closed = False

    # --- the Embedder protocol ---
    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def dims(self) -> int:
        return self._spec.dims

    @property
    def fingerprint(self) -> str:
        return self._spec.fingerprint

    @property
    def max_tokens(self) -> int:
        return self._spec.max_tokens

    def __repr__(self) -> str:
        return (f"LocalEmbedder(name={self.name!r}, dims={self.dims}, n_batch={self._n_batch}, "
                f"n_threads={self._n_threads})")

    def tokenize(self, text: str | bytes) -> list[int]:
        """The token ids the model sees for ``text``: [CLS] ... [SEP], at most ``max_tokens``."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        elif not isinstance(text, str):
            text = str(text)
        # Lone surrogates (from surrogateescape-decoded file names) cannot be encoded as UTF-8.
        data = text[: self._spec.max_tokens * _CHARS_PER_TOKEN_BOUND].encode("utf-8", errors="replace")
        tokens: list[int] = self._llm.tokenize(data, add_bos=True, special=False)
        if len(tokens) > self._spec.max_tokens:
            # Keep [CLS] and the first words, close with [SEP], as sentence-transformers truncates.
            tokens = [*tokens[: self._spec.max_tokens - 1], self._sep]
        return tokens

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One L2-normalised row per text, in order; deterministic for a given text and batch."""
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        if not texts:
            return out
        with self._lock:
            if self._closed:
                raise EmbedError("this embedder is closed")
            token_lists = [self.tokenize(t) for t in texts]
            start = 0
            while start < len(token_lists):
                end = start + 1
                used = len(token_lists[start])
                while (end < len(token_lists) and end - start < self._max_seqs
                       and used + len(token_lists[end]) <= self._n_batch):
                    used += len(token_lists[end])
                    end += 1
                self._decode(token_lists[start:end], out[start:end])
                start = end
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        out /= np.maximum(norms, np.float32(1e-12))
        return out

    def _decode(self, group: list[list[int]], dest: npt.NDArray[np.float32]) -> None:
        lib = self._lib
        batch = self._batch
        ctx = self._llm.ctx
        j = 0
        for seq, tokens in enumerate(group):
            for pos, tok in enumerate(tokens):
                batch.token[j] = tok
                batch.pos[j] = pos
                batch.n_seq_id[j] = 1
                batch.seq_id[j][0] = seq
                # Every token is an output: mean pooling reads them all.
                batch.logits[j] = 1
                j += 1
        batch.n_tokens = j
        memory = lib.llama_get_memory(ctx)
        if memory:  # BERT-style encoders run without a KV cache
            lib.llama_memory_clear(memory, True)
        rc = lib.llama_decode(ctx, batch)
        if rc != 0:
            raise EmbedError(f"llama_decode failed with code {rc} on {len(group)} texts / {j} tokens")
        for seq in range(len(group)):
            ptr = lib.llama_get_embeddings_seq(ctx, seq)
            if not ptr:
                raise EmbedError(f"llama.cpp returned no pooled embedding for sequence {seq}")
            dest[seq] = np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(self.dims,))

    def set_threads(self, n: int) -> None:
        """Threads for the next calls (llama_set_n_threads: no reload; the context is kept)."""
        n = max(1, int(n))
        with self._lock:
            if n != self._threads_now and not self._closed:
                self._lib.llama_set_n_threads(self._llm.ctx, n, n)
                self._threads_now = n

    @property
    def threads(self) -> int:
        return self._threads_now

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._free_batch()
            self._llm.close()

    def __enter__(self) -> LocalEmbedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
