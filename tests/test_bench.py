"""The benchmark's quick mode on the tiny model, so the benchmark command cannot rot unnoticed."""

import json
import subprocess
import sys
import time

from bench.workload import NEW_TOKENS
from config.settings import PROJECT_ROOT
from modelprep.hardware import resolve_dtype


def test_the_quick_benchmark_measures_every_system_and_writes_its_report(tiny_model_dir, tmp_path):
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "bench", "--quick", "--model", str(tiny_model_dir), "--out",
                           str(tmp_path)], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    systems = results["systems"]
    assert {"transformers_bf16_sequential", "engine_bf16", "engine_int8", "ui"} <= set(systems)
    assert results["served"] == "bf16"  # a model given by --model is served as given
    # The 16-bit run serves the original weights in the dtype this CPU runs natively (float32 without bfloat16).
    assert systems["engine_int8"]["weights"] == "int8" and systems["engine_bf16"]["weights"] == resolve_dtype("auto")
    for name, system in systems.items():
        assert [run["users"] for run in system["runs"]] == [1, 2], name
        for run in system["runs"]:
            assert all(reply["tokens"] == NEW_TOKENS for reply in run["replies"]), name
            assert all(0 < reply["first_token"] < reply["last_token"] for reply in run["replies"]), name
            assert 0 < run["ttft_p50_s"] <= run["ttft_p95_s"] and run["aggregate_tokens_per_s"] > 0, name
        assert system["memory_bytes"] > 100 * 1024**2, name
    # One after another: the second user's first token waits for the whole first reply.
    sequential = systems["transformers_bf16_sequential"]["runs"][1]["replies"]
    assert sequential[1]["first_token"] > sequential[0]["last_token"]
    assert results["machine"]["read_bandwidth_gb_s"] > 1 and results["ceilings"]["int8"] > results["ceilings"]["bf16"]
    assert set(results["ratios"]) >= {"one_stream_vs_transformers", "2_chats_vs_transformers_sequential",
                                      "ui_vs_engine_at_1", "ui_vs_engine_at_2"}
    assert (tmp_path / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = (tmp_path / "table.md").read_text()
    assert "| this app's engine, int8 | 2 |" in table and "one stream vs transformers" in table
    assert f"| full UI path (Chainlit), bf16 weights in {resolve_dtype('auto')} | 2 |" in table
    print(f"quick benchmark: {elapsed:.0f} s")


def test_the_soak_counts_replies_and_reads_each_processs_memory_over_time(tmp_path):
    """Half a minute of the soak on the scripted engine (the command's machinery; its figures are the real app's)."""
    out = tmp_path / "soak.json"
    done = subprocess.run([sys.executable, "-m", "bench.studies.soak", "--engine", "fake", "--minutes", "0.5", "--every", "5",
                           "--visitors", "3", "--out", str(out)], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["replies"] >= 3 and result["chats"] >= 3 and result["failures"] == []
    assert len(result["samples"]) >= 5 and all(sample["memory"]["web"]["rss"] > 0 for sample in result["samples"])
    assert {"web rss", "web pss"} <= set(result["thirds"]) and result["left_after_stop"] == []
    assert "web rss: middle third" in done.stdout
