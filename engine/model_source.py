"""Where the model comes from: `CHAT_MODEL` resolved to a local Hugging Face folder.

`CHAT_MODEL` may be empty (the bundled demo model), a local model folder, a `.gguf` file, or a
ModelScope model id such as `Qwen/Qwen2.5-7B-Instruct`. Anything that has to be fetched or converted
is prepared only by the set-up step (`prepare=True`, run by `./run.sh` and `./test.sh`), into the
app's cache or ModelScope's; the app itself (`prepare=False`) only looks things up, so starting it
never downloads and never converts. Checking what the folder holds is `engine.preflight`'s job.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Callable

from modelscope import snapshot_download
from modelscope_hub.errors import CacheNotFound, HubError

from engine.demo_model import NAME as DEMO_NAME
from engine.demo_model import fetch_demo_gguf
from engine.errors import ModelLoadError
from engine.gguf_import import convert_gguf
from engine.model_cache import build_once, is_complete

MODELSCOPE_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
PREPARE_HINT = "Run ./run.sh (it prepares the model before starting the app) or `.venv/bin/python -m engine.prepare`."


def resolve_model(spec: str, cache_dir: Path, prepare: bool) -> Path:
    """The local folder for `spec` (the `CHAT_MODEL` setting); fetch or convert it only if `prepare`."""
    if not spec:
        return _converted(cache_dir / "demo" / DEMO_NAME, lambda: fetch_demo_gguf(cache_dir / "demo"), prepare,
                          "The bundled demo model")
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        return _converted(_gguf_cache_folder(path, cache_dir), lambda: path, prepare, f"CHAT_MODEL={spec}")
    if path.exists():
        return path
    if MODELSCOPE_ID.fullmatch(spec):
        return _modelscope_folder(spec, prepare)
    raise ModelLoadError(f"CHAT_MODEL={spec}: there is no such folder or file. Set it to a model folder, "
                         "a .gguf file or a ModelScope id such as Qwen/Qwen2.5-7B-Instruct.")


def _converted(folder: Path, source: Callable[[], Path], prepare: bool, what: str) -> Path:
    """`folder` if it is complete; otherwise, when preparing, converted anew from the GGUF `source()` gives."""
    if is_complete(folder):
        return folder
    if not prepare:
        raise ModelLoadError(f"{what} is not converted yet, or its converted copy in {folder} is damaged. "
                             + PREPARE_HINT)
    gguf = source()
    print(f"==> Converting {gguf.name} to a bfloat16 model folder in {folder} (once)")
    return build_once(folder, lambda out: convert_gguf(gguf, out))


def _gguf_cache_folder(gguf: Path, cache_dir: Path) -> Path:
    """A folder per file version: a GGUF replaced in place (new size or time) is converted again."""
    status = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}:{status.st_size}:{status.st_mtime_ns}".encode()).hexdigest()[:16]
    return cache_dir / "gguf" / key / gguf.stem


def _modelscope_folder(model_id: str, prepare: bool) -> Path:
    """ModelScope's cached copy of `model_id`; with `prepare`, downloaded into that cache if missing."""
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
