"""Where the model comes from: `CHAT_MODEL` resolved to a local Hugging Face folder.

`CHAT_MODEL` may be empty (the default bundled demo model: `default_demo`), `demo-0.5b` or `demo-1.5b` (a
bundled demo model by name), a local model folder, a `.gguf` file, or a
ModelScope model id such as `Qwen/Qwen2.5-7B-Instruct`. Anything that has to be fetched or converted
is prepared only by the set-up step (`prepare=True`, run by `./run.sh` and `./test.sh`), into the
app's cache or ModelScope's; the app itself (`prepare=False`) only looks things up, so starting it
never downloads and never converts. Checking what the folder holds is `modelprep.preflight`'s job.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from config.errors import ModelLoadError
from modelprep.cache import build_once, is_complete
from modelprep.demo import DEMOS, fetch_demo_gguf
from modelprep.hardware import fast_int8, int4_kernel
from modelprep.quantization.checkpoint import weight_format

MODELSCOPE_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
PREPARE_HINT = "Run ./run.sh (it prepares the model before starting the app) or `.venv/bin/python -m modelprep`."


def default_demo() -> str:
    """The demo model an empty `CHAT_MODEL` serves: the 1.5B where the CPU computes int8 fast (grounded in the
    guide it answers 9 questions in 10 right where the 0.5B answers 7, and in int8 it streams well above reading
    speed even on two cores: `bench.knowledge`), else the 0.5B, which stays fast enough in 16-bit
    (docs/models.md)."""
    return "demo-1.5b" if fast_int8() else "demo-0.5b"


def resolve_model(spec: str, cache_dir: Path, prepare: bool, weights: str = "auto") -> Path:
    """The local folder for `spec` (the `CHAT_MODEL` setting) in the `weights` format (`CHAT_WEIGHTS`; `auto`
    serves a demo model in int8 where the CPU computes int8 fast, see `fast_int8`); fetch, convert or
    quantise it only if `prepare`. 4-bit weights only where vLLM's 4-bit kernel runs (`int4_kernel`)."""
    if weights == "int4" and not int4_kernel():
        raise ModelLoadError("CHAT_WEIGHTS=int4: this CPU lacks AVX-512 VNNI or bf16, which vLLM's 4-bit kernel "
                             "needs (without them it crashes or crawls). Set CHAT_WEIGHTS=int8 (or auto) instead.")
    folder = _source_folder(spec, cache_dir, prepare)
    demo = not spec or spec in DEMOS
    what = "The bundled demo model" if demo else f"CHAT_MODEL={spec}"
    if weights == "int8" or (weights == "auto" and demo and fast_int8()):
        return _quantized(folder, "int8", cache_dir, prepare, what)
    if weights == "int4":
        return _quantized(folder, "int4", cache_dir, prepare, what)
    return folder


def _source_folder(spec: str, cache_dir: Path, prepare: bool) -> Path:
    if not spec or spec in DEMOS:
        name = spec or default_demo()
        demo = DEMOS[name]
        return _converted(cache_dir / "demo" / demo.name, lambda: fetch_demo_gguf(cache_dir / "demo", demo), prepare,
                          f"The bundled {name} demo model")
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _converted(_gguf_cache_folder(path, cache_dir), lambda: path, prepare, f"CHAT_MODEL={spec}")
    if path.exists():
        return path
    if MODELSCOPE_ID.fullmatch(spec):
        return _modelscope_folder(spec, prepare)
    raise ModelLoadError(f"CHAT_MODEL={spec}: there is no such folder or file. Set it to a model folder, "
                         "a .gguf file, a ModelScope id such as Qwen/Qwen2.5-7B-Instruct, or a bundled demo model: "
                         f"{', '.join(DEMOS)}.")


def _converted(folder: Path, source: Callable[[], Path], prepare: bool, what: str) -> Path:
    """`folder` if it is complete; otherwise, when preparing, converted anew from the GGUF `source()` gives."""
    if is_complete(folder):
        return folder
    if not prepare:
        raise ModelLoadError(f"{what} is not converted yet, or its converted copy in {folder} is damaged. "
                             + PREPARE_HINT)
    from modelprep.gguf import convert_gguf  # torch and transformers: only to convert

    gguf = source()
    print(f"==> Converting {gguf.name} to a bfloat16 model folder in {folder} (once)")
    return build_once(folder, lambda out: convert_gguf(gguf, out))


def _quantized(folder: Path, weights: str, cache_dir: Path, prepare: bool, what: str) -> Path:
    """`folder` if it is in `weights` ("int8", "int4") already, else its copy in the cache, quantised once when
    preparing."""
    if weight_format(folder) == weights:
        return folder
    parent = folder.parent if folder.is_relative_to(cache_dir) else cache_dir / weights / _key(folder.resolve())
    target = parent / f"{folder.name}-{weights}"
    if is_complete(target):
        return target
    if not prepare:
        raise ModelLoadError(f"{what} in {weights} (CHAT_WEIGHTS) is not quantised yet, or its copy in {target} is "
                             "damaged. " + PREPARE_HINT)
    from modelprep.quantization.command import quantize  # torch: only to quantise

    took = " (calibrated: about 10 minutes a billion parameters on 2 cores)" if weights == "int4" else ""
    print(f"==> Quantising {folder.name} to {weights} in {target} (once){took}")
    return build_once(target, lambda out: quantize(folder, out, weights))


def _key(text: object) -> str:
    return hashlib.sha256(str(text).encode()).hexdigest()[:16]


def _gguf_cache_folder(gguf: Path, cache_dir: Path) -> Path:
    """A folder per file version: a GGUF replaced in place (new size or time) is converted again."""
    status = gguf.stat()
    return cache_dir / "gguf" / _key(f"{gguf.resolve()}:{status.st_size}:{status.st_mtime_ns}") / gguf.stem


def _modelscope_folder(model_id: str, prepare: bool) -> Path:
    """ModelScope's cached copy of `model_id`; with `prepare`, downloaded into that cache if missing."""
    from modelscope import snapshot_download  # imports torch: only for a ModelScope id
    from modelscope_hub.errors import CacheNotFound, HubError

    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except CacheNotFound:
        if not prepare:
            raise ModelLoadError(f"The ModelScope model {model_id} is not in ModelScope's cache yet. "
                                 + PREPARE_HINT) from None
    print(f"==> Downloading {model_id} from ModelScope into its cache")
    try:
        return Path(snapshot_download(model_id))
    except (HubError, OSError) as error:
        raise ModelLoadError(
            f"The ModelScope model {model_id} is not cached here and could not be downloaded ({error}). "
            f"Without internet, copy the model folder from a machine that has it (ModelScope keeps it in "
            f"~/.cache/modelscope/hub/models/{model_id.split('/')[0]}/...) and set CHAT_MODEL to that folder."
        ) from None
