"""Settings are read once from the environment, typed, validated, frozen."""

import dataclasses
from dataclasses import fields

import pytest

from config.errors import ConfigError
from config.settings import Settings, load_settings
from modelprep.hardware import resolve_dtype

pytestmark = pytest.mark.fast


def test_defaults_and_overrides():
    settings = load_settings({"CHAT_MODEL": "/m", "CHAT_TEMPERATURE": "0", "CHAT_THREADS": "4",
                              "CHAT_ENABLE_THINKING": "yes"})
    assert (settings.model, settings.temperature, settings.threads) == ("/m", 0.0, 4)
    assert settings.enable_thinking is True
    assert settings.max_new_tokens == 512 and settings.persona == "tour_guide"
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.model = "/other"


def test_no_model_means_the_demo_model_and_paths_expand_the_home_folder(monkeypatch):
    monkeypatch.setenv("HOME", "/home/guide")
    settings = load_settings({"CHAT_CACHE_DIR": "~/cache"})
    assert settings.model == "" and str(settings.cache_dir) == "/home/guide/cache"


@pytest.mark.parametrize("environ, names", [
    ({"CHAT_MODEL": "/m", "CHAT_DTYPE": "int3"}, "CHAT_DTYPE"),
    ({"CHAT_MODEL": "/m", "CHAT_TEMPERATURE": "hot"}, "CHAT_TEMPERATURE"),
    ({"CHAT_MODEL": "/m", "CHAT_TOP_P": "0"}, "CHAT_TOP_P"),
    ({"CHAT_MODEL": "/m", "CHAT_MAX_NEW_TOKENS": "5000"}, "CHAT_MAX_NEW_TOKENS"),
    ({"CHAT_MODEL": "/m", "CHAT_ENABLE_THINKING": "maybe"}, "CHAT_ENABLE_THINKING"),
    ({"CHAT_REPETITION_PENALTY": "0.5"}, "CHAT_REPETITION_PENALTY"),
    ({"CHAT_TOP_K": "-1"}, "CHAT_TOP_K"),
    ({"CHAT_WEIGHTS": "int2"}, "CHAT_WEIGHTS"),
    ({"CHAT_RESERVED_CPUS": "-1"}, "CHAT_RESERVED_CPUS"),
    ({"CHAT_BATCH_TOKENS": "32"}, "CHAT_BATCH_TOKENS"),
    ({"CHAT_STREAM_UPDATE_SECONDS": "-0.1"}, "CHAT_STREAM_UPDATE_SECONDS"),
    ({"CHAT_SIDEBAR_UPDATE_SECONDS": "0"}, "CHAT_SIDEBAR_UPDATE_SECONDS"),
    ({"CHAT_BATCH_TOKENS": "100", "CHAT_MAX_CONCURRENT_REPLIES": "128"}, "CHAT_BATCH_TOKENS"),
])
def test_bad_values_name_the_variable(environ, names):
    with pytest.raises(ConfigError, match=names):
        load_settings(environ)


def test_auto_dtype_follows_the_cpu(monkeypatch):
    import modelprep.hardware as hardware

    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert resolve_dtype("auto") == "bfloat16"
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx2"}))
    assert resolve_dtype("auto") == "float32"
    assert resolve_dtype("bfloat16") == "bfloat16"


def test_int8_is_the_default_only_where_the_cpu_multiplies_int8_natively(monkeypatch):
    import modelprep.hardware as hardware

    for flags, fast in (({"avx2", "fma"}, False), ({"avx512f", "avx512_bf16"}, False), ({"avx512_vnni"}, True),
                        ({"avx_vnni"}, True), ({"amx_int8"}, True)):
        monkeypatch.setattr(hardware, "cpu_flags", lambda flags=flags: frozenset(flags))
        assert hardware.fast_int8() is fast, flags


def test_4bit_weights_only_where_vllm_has_their_kernel(monkeypatch):
    import modelprep.hardware as hardware

    for flags, runs in (({"avx2", "fma", "avx_vnni"}, False), ({"avx512f", "avx512_vnni"}, False),
                        ({"avx512f", "avx512_bf16"}, False), ({"avx512_vnni", "avx512_bf16"}, True),
                        ({"amx_int8", "amx_bf16"}, True)):
        monkeypatch.setattr(hardware, "cpu_flags", lambda flags=flags: frozenset(flags))
        assert hardware.int4_kernel() is runs, flags


def test_engine_urls_are_checked_and_listed():
    settings = load_settings({"CHAT_ENGINE_URLS": "http://10.0.0.5:8000/v1, http://10.0.0.6:8000/v1/"})
    assert settings.engine_urls == ("http://10.0.0.5:8000/v1", "http://10.0.0.6:8000/v1")
    with pytest.raises(ConfigError, match=r"'10\.0\.0\.5:8000' is not the base URL .* http://HOST:PORT/v1"):
        load_settings({"CHAT_ENGINE_URLS": "10.0.0.5:8000"})


def test_the_settings_tables_and_env_example_are_written_from_the_settings():
    from config import docs

    for table in docs.TABLES:
        text = table.path.read_text(encoding="utf-8")
        assert table.written_into(text) == text, f"{table.path.name} drifted: run .venv/bin/python -m config.docs"
    assert docs.ENV_EXAMPLE.read_text(encoding="utf-8") == docs.env_example(), "run: .venv/bin/python -m config.docs"
    assert docs.settings_table().count("\n| `CHAT_") == len(fields(Settings))
    assert docs.settings_table(docs.MAIN).count("\n| `CHAT_") == len(docs.MAIN)


def test_env_example_copied_to_env_changes_nothing(tmp_path):
    from config import docs
    from config.settings import read_env_file

    (tmp_path / ".env").write_text(docs.env_example())
    assert read_env_file(tmp_path / ".env") == {}  # every default is commented out: the file only shows them
