"""`python -m modelprep.quantization [--weights int8|int4] SOURCE OUT`: an int8 (`int8`) or 4-bit (`int4`) copy of
a Hugging Face model folder, which vLLM runs faster on CPU."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from config.errors import ModelLoadError, cannot
from modelprep.quantization.int8 import quantize_folder


def quantize(source: Path, out: Path, weights: str) -> None:
    """`source` in `weights` ("int8" or "int4") written into the existing folder `out`."""
    if weights == "int4":
        from modelprep.quantization.int4 import quantize_int4  # AutoRound and what it imports: only for 4 bits

        quantize_int4(source, out)
    else:
        quantize_folder(source, out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m modelprep.quantization", description=__doc__.splitlines()[0])
    parser.add_argument("--weights", choices=("int8", "int4"), default="int8",
                        help="int4: 4-bit, calibrated (AutoRound), for CPUs with AVX-512 VNNI and bf16; minutes to hours")
    parser.add_argument("source", type=Path, help="model folder in bf16, fp16 or fp32 (safetensors)")
    parser.add_argument("out", type=Path, help="new folder for the quantised model (must not exist)")
    arguments = parser.parse_args(argv)
    if arguments.out.exists():
        return cannot("quantise", f"{arguments.out} already exists; name a new folder.")
    arguments.out.mkdir(parents=True)
    try:
        quantize(arguments.source, arguments.out, arguments.weights)
    except ModelLoadError as error:
        shutil.rmtree(arguments.out)
        return cannot("quantise", error)
    print(f"==> {arguments.weights} model written to {arguments.out}; set CHAT_MODEL={arguments.out} to use it")
    return 0
