"""CHAT_MODEL resolved: local folder, .gguf file (converted once), ModelScope id, and the demo default."""

import shutil
from pathlib import Path

import modelscope
import pytest
from modelscope_hub.errors import CacheNotFound, NetworkError

import modelprep.gguf
import modelprep.quantization.command
import modelprep.source as model_source
from config.errors import ModelLoadError
from modelprep.source import resolve_model
from tests.tiny_gguf import write_gguf

pytestmark = pytest.mark.fast


def test_a_local_folder_is_used_as_it_is(tiny_model_dir, tmp_path):
    assert resolve_model(str(tiny_model_dir), tmp_path, prepare=False) == tiny_model_dir


def test_a_missing_path_says_what_chat_model_may_be(tmp_path):
    with pytest.raises(ModelLoadError, match="no such folder or file.*ModelScope id"):
        resolve_model(str(tmp_path / "nowhere"), tmp_path, prepare=True)


def test_the_demo_model_is_never_fetched_by_the_app(tmp_path, monkeypatch):
    monkeypatch.setattr(model_source, "fetch_demo_gguf", lambda *_: pytest.fail("the app fetched"))
    with pytest.raises(ModelLoadError, match=r"demo model is not converted yet.*\./run\.sh"):
        resolve_model("", tmp_path, prepare=False)


def test_the_bundled_demo_models_go_by_name_and_an_unknown_name_lists_them(tmp_path, monkeypatch):
    monkeypatch.setattr(model_source, "fetch_demo_gguf", lambda *_: pytest.fail("the app fetched"))
    with pytest.raises(ModelLoadError, match=r"demo-1\.5b demo model is not converted yet"):
        resolve_model("demo-1.5b", tmp_path, prepare=False, weights="original")
    with pytest.raises(ModelLoadError, match="demo-0.5b, demo-1.5b"):
        resolve_model("demo-7b", tmp_path, prepare=False)


def test_an_empty_chat_model_serves_the_larger_demo_only_where_int8_is_fast(monkeypatch):
    for fast, expected in ((True, "demo-1.5b"), (False, "demo-0.5b")):
        monkeypatch.setattr(model_source, "fast_int8", lambda fast=fast: fast)
        assert model_source.default_demo() == expected


def test_4bit_weights_are_refused_where_the_cpu_lacks_their_kernel_and_never_chosen_by_auto(tiny_model_dir, tmp_path,
                                                                                          monkeypatch):
    # An AVX2-only CPU, as at many client sites: vLLM's 4-bit kernel would crash there (vllm issue 55613).
    monkeypatch.setattr(model_source, "int4_kernel", lambda: False)
    monkeypatch.setattr(model_source, "fast_int8", lambda: False)
    monkeypatch.setattr(modelprep.quantization.command, "quantize", lambda *_: pytest.fail("quantised"))
    with pytest.raises(ModelLoadError, match=r"CHAT_WEIGHTS=int4: this CPU lacks AVX-512 VNNI or bf16.*CHAT_WEIGHTS=int8"):
        resolve_model(str(tiny_model_dir), tmp_path, prepare=True, weights="int4")
    assert resolve_model(str(tiny_model_dir), tmp_path, prepare=True, weights="auto") == tiny_model_dir
    monkeypatch.setattr(model_source, "int4_kernel", lambda: True)  # where it runs, the app only looks the copy up
    with pytest.raises(ModelLoadError, match=r"in int4 \(CHAT_WEIGHTS\) is not quantised yet.*\./run\.sh"):
        resolve_model(str(tiny_model_dir), tmp_path, prepare=False, weights="int4")


def test_a_gguf_file_is_converted_once_and_a_damaged_copy_is_rebuilt(tiny_model_dir, tmp_path, monkeypatch):
    gguf_file = write_gguf(tiny_model_dir, tmp_path / "tiny-q8.gguf")
    cache = tmp_path / "cache"
    with pytest.raises(ModelLoadError, match="not converted yet"):
        resolve_model(str(gguf_file), cache, prepare=False)
    folder = resolve_model(str(gguf_file), cache, prepare=True)
    assert folder.name == "tiny-q8" and cache in folder.parents and (folder / "model.safetensors").is_file()

    conversions = []
    real_convert = modelprep.gguf.convert_gguf
    monkeypatch.setattr(modelprep.gguf, "convert_gguf", lambda *args: (conversions.append(args), real_convert(*args)))
    assert resolve_model(str(gguf_file), cache, prepare=False) == folder  # the app finds the converted copy
    assert resolve_model(str(gguf_file), cache, prepare=True) == folder and conversions == []

    with (folder / "model.safetensors").open("r+b") as weights:  # a disk error or an interrupted copy
        weights.truncate(1000)
    with pytest.raises(ModelLoadError, match="damaged"):
        resolve_model(str(gguf_file), cache, prepare=False)
    assert resolve_model(str(gguf_file), cache, prepare=True) == folder and len(conversions) == 1


def fake_snapshot_download(folder: Path, cached: bool, online: bool, calls: list):
    def snapshot_download(model_id, local_files_only=False):
        calls.append((model_id, local_files_only))
        if local_files_only and not cached:
            raise CacheNotFound("not cached")
        if not local_files_only and not online:
            raise NetworkError("no network")
        return str(folder)
    return snapshot_download


def test_a_modelscope_id_is_downloaded_by_the_setup_when_not_cached(tiny_model_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(modelscope, "snapshot_download",
                        fake_snapshot_download(tiny_model_dir, cached=False, online=True, calls=calls))
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct", tmp_path, prepare=True) == tiny_model_dir
    assert calls == [("Qwen/Qwen2.5-7B-Instruct", True), ("Qwen/Qwen2.5-7B-Instruct", False)]


def test_the_app_never_downloads_a_modelscope_id(tiny_model_dir, tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(modelscope, "snapshot_download",
                        fake_snapshot_download(tiny_model_dir, cached=False, online=True, calls=calls))
    with pytest.raises(ModelLoadError, match="Qwen/Qwen2.5-7B-Instruct is not in ModelScope's cache"):
        resolve_model("Qwen/Qwen2.5-7B-Instruct", tmp_path, prepare=False)
    assert calls == [("Qwen/Qwen2.5-7B-Instruct", True)]


def test_offline_and_not_cached_says_how_to_copy_the_model_in(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(modelscope, "snapshot_download",
                        fake_snapshot_download(tiny_model_dir, cached=False, online=False, calls=[]))
    with pytest.raises(ModelLoadError, match="Qwen/Qwen2.5-7B-Instruct is not cached here.*copy the model folder"):
        resolve_model("Qwen/Qwen2.5-7B-Instruct", tmp_path, prepare=True)


def test_offline_a_model_in_modelscopes_cache_is_found(tiny_model_dir, tmp_path, monkeypatch):
    # ModelScope's own layout: <MODELSCOPE_CACHE>/models/<owner>/<name with dots as ___>.
    cached = tmp_path / "modelscope" / "models" / "Qwen" / "Qwen2___5-0___5B-Instruct"
    shutil.copytree(tiny_model_dir, cached)
    monkeypatch.setenv("MODELSCOPE_CACHE", str(tmp_path / "modelscope"))
    assert resolve_model("Qwen/Qwen2.5-0.5B-Instruct", tmp_path, prepare=False) == cached
