"""Convert an allow-listed BERT model from its package's safetensors to a GGUF llama.cpp loads.

Only numpy, safetensors and gguf are used (no torch). The file follows what llama.cpp's BERT
loader reads: architecture ``bert``; context, embedding, feed-forward, block and head counts,
layer-norm epsilon, non-causal attention and MEAN pooling; the WordPiece vocabulary as
tokenizer model ``bert`` in llama.cpp's "phantom space" spelling (a word start carries U+2581,
a ``##`` continuation drops its prefix, special tokens stay as they are) with token types and
the [CLS]/[SEP]/[UNK]/[PAD]/[MASK] ids; tensors under llama.cpp's names (``gguf.TensorNameMap``).
Matrices are stored f16; norms, biases, position and token-type embeddings f32, as llama.cpp's
own converter does (its CPU kernels expect f32 there).

Besides llama.cpp's keys the file records ``aivault.*`` keys (model name, format version, source
package). ``ensure_gguf`` writes a manifest beside it (``<file>.json``: model, format version,
size, SHA-256 of the whole file) and trusts an existing file only if the manifest matches the
allow-list and the bytes, so a file from another format version, a truncated copy or flipped
bits are replaced. (The manifest, not the embedded keys, is checked because gguf's reader takes
~1 s to parse the 30k-token vocabulary; hashing the 46 MB file takes ~50 ms.)

    python -m aivault.embed.convert --out FILE [--model all-minilm-l6-v2]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from aivault import log
from aivault.embed.models import DEFAULT_MODEL, ModelSpec, get_model, source_files
from aivault.errors import BackendMissing, ModelNotInstalled

KEY_MODEL = "aivault.model"
KEY_FORMAT = "aivault.format_version"
KEY_SOURCE = "aivault.source"
MANIFEST_SUFFIX = ".json"
# What a full check of the file's checksum saw (its stat and the manifest's checksum): later checks
# trust an unchanged stat instead of hashing 46 MB (~50 ms) again, as git trusts its index. Never
# recorded for a file modified less than VERIFIED_MIN_AGE_S before the check: a write within the
# file system's timestamp granularity could leave the stat unchanged (git's "racy" files).
VERIFIED_SUFFIX = ".verified"
VERIFIED_MIN_AGE_S = 2.0
_HASH_CHUNK_BYTES = 1 << 20

# HF tensors llama.cpp's BERT graph does not use (it pools itself; no MLM/NSP heads).
_SKIPPED_PREFIXES = ("embeddings.position_ids", "pooler.", "cls.predictions", "cls.seq_relationship")
_SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

_log = log.get("aivault.embed.convert")
# One conversion at a time per process; across processes the atomic rename keeps readers safe.
_ensure_lock = threading.Lock()


def _import_backends() -> tuple[Any, Any]:
    try:
        import gguf
        from safetensors.numpy import load_file
    except ImportError as exc:
        raise BackendMissing(
            f"converting the embedding model needs gguf and safetensors ({exc.name} is missing): "
            "run ./dev test, or .venv/bin/python -m pip install -e .") from None
    return gguf, load_file


def _read_vocab(path: Path) -> list[str]:
    vocab = path.read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    return vocab


def _phantom(token: str, is_special: bool) -> str:
    # llama.cpp's WPM tokenizer marks word starts with U+2581 instead of marking continuations.
    if is_special:
        return token
    if token.startswith("##"):
        return token[2:]
    return "\u2581" + token


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _check_config(spec: ModelSpec, config: dict[str, Any], files: dict[str, Path]) -> None:
    if config.get("model_type") != "bert":
        raise ModelNotInstalled(f"{spec.package} does not hold a BERT model (model_type={config.get('model_type')!r})")
    if int(config["hidden_size"]) != spec.dims:
        raise ModelNotInstalled(f"{spec.package} has hidden size {config['hidden_size']}, expected {spec.dims}")
    if config.get("hidden_act", "gelu") != "gelu" or config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelNotInstalled(f"{spec.package}: only gelu activations and absolute positions are supported")
    pooling = files.get("1_Pooling/config.json")
    if pooling is not None and not json.loads(pooling.read_text(encoding="utf-8")).get("pooling_mode_mean_tokens"):
        raise ModelNotInstalled(f"{spec.package}: sentence-transformers pooling is not mean pooling")


def convert(model_name: str, out_path: Path | str) -> Path:
    """Write ``model_name`` as an f16 GGUF at ``out_path`` (atomically: temp file, then rename)."""
    spec = get_model(model_name)
    gguf, load_file = _import_backends()
    files = source_files(spec)
    config: dict[str, Any] = json.loads(files["config.json"].read_text(encoding="utf-8"))
    _check_config(spec, config, files)
    vocab = _read_vocab(files["vocab.txt"])
    if len(vocab) != int(config["vocab_size"]):
        raise ModelNotInstalled(
            f"{spec.package}: vocab.txt has {len(vocab)} tokens, config says {config['vocab_size']}")
    ids = {tok: i for i, tok in enumerate(vocab)}
    missing = [t for t in _SPECIAL_TOKENS if t not in ids]
    if missing:
        raise ModelNotInstalled(f"{spec.package}: vocab.txt lacks {', '.join(missing)}")

    n_layers = int(config["num_hidden_layers"])
    arch = gguf.MODEL_ARCH.BERT
    name_map = gguf.TensorNameMap(arch, n_layers)
    f32_always = {gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.POS_EMBD] + ".weight",
                  gguf.TENSOR_NAMES[gguf.MODEL_TENSOR.TOKEN_TYPES] + ".weight"}

    tensors: list[tuple[str, npt.NDArray[Any]]] = []
    for hf_name, data in sorted(load_file(str(files["model.safetensors"])).items()):
        hf_name = hf_name.removeprefix("bert.")
        if hf_name.startswith(_SKIPPED_PREFIXES):
            continue
        new_name = name_map.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if new_name is None:
            raise ModelNotInstalled(f"{spec.package}: tensor {hf_name!r} has no llama.cpp BERT name")
        keep_f32 = (data.ndim == 1 or not new_name.endswith(".weight") or new_name.endswith("_norm.weight")
                    or new_name in f32_always)
        tensors.append((new_name, data.astype(np.float32 if keep_f32 else np.float16)))

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
    os.close(fd)  # mkstemp made it 0600; GGUFWriter reopens it by name and keeps that mode
    tmp = Path(tmp_name)
    try:
        writer = gguf.GGUFWriter(tmp, arch=gguf.MODEL_ARCH_NAMES[arch])
        writer.add_name(spec.name)
        writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        writer.add_context_length(int(config["max_position_embeddings"]))
        writer.add_embedding_length(int(config["hidden_size"]))
        writer.add_feed_forward_length(int(config["intermediate_size"]))
        writer.add_block_count(n_layers)
        writer.add_head_count(int(config["num_attention_heads"]))
        writer.add_layer_norm_eps(float(config["layer_norm_eps"]))
        writer.add_causal_attention(False)
        writer.add_pooling_type(gguf.PoolingType.MEAN)

        special = {ids[t] for t in _SPECIAL_TOKENS}
        writer.add_tokenizer_model("bert")
        writer.add_tokenizer_pre("default")  # llama.cpp ignores the pre-tokenizer name for WPM vocabularies
        writer.add_token_list([_phantom(tok, i in special) for i, tok in enumerate(vocab)])
        writer.add_token_types([gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL
                                for i in range(len(vocab))])
        writer.add_token_type_count(int(config.get("type_vocab_size", 2)))
        writer.add_bos_token_id(ids["[CLS]"])  # llama.cpp's WPM tokenizer opens each text with BOS
        writer.add_sep_token_id(ids["[SEP]"])
        writer.add_unk_token_id(ids["[UNK]"])
        writer.add_pad_token_id(ids["[PAD]"])
        writer.add_mask_token_id(ids["[MASK]"])
        writer.add_add_bos_token(True)
        writer.add_add_sep_token(True)
        writer.add_add_eos_token(False)

        writer.add_string(KEY_MODEL, spec.name)
        writer.add_uint32(KEY_FORMAT, spec.format_version)
        writer.add_string(KEY_SOURCE, f"{spec.package}=={spec.package_version}")
        for name, data in tensors:
            writer.add_tensor(name, data)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, out_path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(out_path.parent)
    return out_path


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename is still atomic
    finally:
        os.close(fd)


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + MANIFEST_SUFFIX)


def _atomic_write_text(path: Path, text: str) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def validate(path: Path, spec: ModelSpec) -> str | None:
    """Why the file at ``path`` cannot be trusted for ``spec``, or None when it can."""
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
        size = path.stat().st_size
    except FileNotFoundError:
        return "no manifest"
    except (OSError, ValueError) as exc:
        return f"unreadable manifest ({type(exc).__name__})"
    if not isinstance(manifest, dict):
        return "unreadable manifest"
    if manifest.get("model") != spec.name:
        return f"written for model {manifest.get('model')!r}"
    if manifest.get("format_version") != spec.format_version:
        return f"format version {manifest.get('format_version')!r}, expected {spec.format_version}"
    if manifest.get("source") != f"{spec.package}=={spec.package_version}":
        return f"converted from {manifest.get('source')!r}"
    if manifest.get("size") != size:
        return f"size {size}, manifest says {manifest.get('size')}"
    if _verified_before(path, manifest):
        return None
    if manifest.get("sha256") != _file_sha256(path):
        return "checksum mismatch"
    _record_verified(path, manifest)
    return None


def verified_path(path: Path) -> Path:
    return path.with_name(path.name + VERIFIED_SUFFIX)


def _stat_key(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _verified_before(path: Path, manifest: dict[str, Any]) -> bool:
    """A full check saw this very file (same inode, size, times) with this manifest's checksum."""
    try:
        record = json.loads(verified_path(path).read_text(encoding="utf-8"))
        return (isinstance(record, dict) and record.get("sha256") == manifest.get("sha256")
                and record.get("stat") == _stat_key(path))
    except (OSError, ValueError):
        return False


def _record_verified(path: Path, manifest: dict[str, Any]) -> None:
    try:
        key = _stat_key(path)
        if time.time_ns() - max(key[3], key[4]) < VERIFIED_MIN_AGE_S * 1e9:
            return  # too recent to be told apart from a write in the same timestamp tick
        _atomic_write_text(verified_path(path), json.dumps({"sha256": manifest.get("sha256"), "stat": key}) + "\n")
    except OSError:
        pass  # a read-only models directory: every check hashes, as before


def ensure_gguf(model_name: str, models_dir: Path | str) -> Path:
    """The converted file for ``model_name`` in ``models_dir``, converting it if absent or invalid.

    ``models_dir`` is created 0700 and the files are 0600, written by atomic rename; the
    manifest is renamed last, so a crash mid-way leaves a file that fails validation and is
    rebuilt, never one that is trusted.
    """
    spec = get_model(model_name)
    models_dir = Path(models_dir)
    with _ensure_lock:
        models_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(models_dir, 0o700)
        path = spec.gguf_path(models_dir)
        if path.exists():
            reason = validate(path, spec)
            if reason is None:
                return path
            _log.warning("embed.model_invalid", path=str(path), reason=reason, action="reconverting")
        started = time.perf_counter()
        manifest_path(path).unlink(missing_ok=True)
        verified_path(path).unlink(missing_ok=True)
        convert(spec.name, path)
        manifest = {
            "model": spec.name,
            "format_version": spec.format_version,
            "source": f"{spec.package}=={spec.package_version}",
            "size": path.stat().st_size,
            "sha256": _file_sha256(path),
        }
        _atomic_write_text(manifest_path(path), json.dumps(manifest, indent=1) + "\n")
        _fsync_dir(models_dir)
        _log.info("embed.model_converted", model=spec.name, path=str(path),
                  seconds=round(time.perf_counter() - started, 2), bytes=manifest["size"])
        return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Convert an allow-listed embedding model to an f16 GGUF.")
    parser.add_argument("--out", type=Path, required=True, help="the GGUF file to write")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="an allow-listed model name")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        out = convert(args.model, args.out)
    except (BackendMissing, ModelNotInstalled, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out} ({out.stat().st_size} bytes) in {time.perf_counter() - started:.2f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
