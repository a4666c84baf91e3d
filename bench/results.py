"""The benchmark's outputs: results.json, chart.png (throughput against chats) and table.md for docs/performance.md.

The ratios the project aims at are computed here, from figures of the same run only.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the file-only backend)


def labels(results: dict) -> dict[str, str]:
    """Each system's line in the table and chart. The 16-bit weights run in the app's dtype for this CPU (float32
    where it has no bfloat16); the UI path serves what the app serves here by default."""
    served = "int8" if results["served"] == "int8" else f"bf16 weights in {results['dtype']}"
    return {
        "transformers_bf16_sequential": "transformers bf16, one after another",
        "llama_cpp_q4_sequential": "llama.cpp Q4_K_M, one after another",
        "engine_bf16": f"this app's engine, bf16 weights in {results['dtype']}",
        "engine_int8": "this app's engine, int8",
        "engine_int4": "this app's engine, int4 (W4A8)",
        "ui": f"full UI path (Chainlit), {served}",
    }


def run_at(system: dict, users: int) -> dict | None:
    return next((run for run in system["runs"] if run["users"] == users), None)


def ratios(results: dict) -> dict:
    """The goals: the engine with the weights the app serves here against the baseline, llama.cpp and itself
    through the UI, at 1 and at most chats."""
    systems = results["systems"]
    engine = systems[f"engine_{results['served']}"]
    most = max(run["users"] for run in engine["runs"])
    found = {
        "one_stream_vs_transformers": run_at(engine, 1)["per_user_tokens_per_s"]
        / run_at(systems["transformers_bf16_sequential"], 1)["per_user_tokens_per_s"],
        f"{most}_chats_vs_transformers_sequential": run_at(engine, most)["aggregate_tokens_per_s"]
        / run_at(systems["transformers_bf16_sequential"], most)["aggregate_tokens_per_s"],
        f"ttft_p50_s_at_{most}_chats": run_at(engine, most)["ttft_p50_s"],
    }
    if "llama_cpp_q4_sequential" in systems:
        found[f"{most}_chats_vs_llama_cpp_sequential"] = (
            run_at(engine, most)["aggregate_tokens_per_s"]
            / run_at(systems["llama_cpp_q4_sequential"], most)["aggregate_tokens_per_s"])
    for run in systems["ui"]["runs"]:
        found[f"ui_vs_engine_at_{run['users']}"] = (run["aggregate_tokens_per_s"]
                                                    / run_at(engine, run["users"])["aggregate_tokens_per_s"])
    return found


def table(results: dict) -> str:
    machine = results["machine"]
    lines = [
        f"Measured on {machine['cpu']}, {machine['cores']} cores, {machine['memory_gib']} GiB, memory read "
        f"bandwidth {machine['read_bandwidth_gb_s']} GB/s; model {results['model']}; {results['new_tokens']} new "
        f"tokens per reply, greedy, all chats arriving together. The app serves {results['served']} weights here "
        "by default: the ratios are of that engine.",
        "",
        "| System | Chats | Tokens/s, all chats | Tokens/s per chat | First token p50 | p95 | Memory (PSS) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in labels(results).items():
        system = results["systems"].get(key)
        for run in system["runs"] if system else []:
            memory = f"{system['memory_bytes'] / 1024**3:.1f} GiB" if "memory_bytes" in system else "–"
            lines.append(f"| {label} | {run['users']} | {run['aggregate_tokens_per_s']:.1f} | "
                         f"{run['per_user_tokens_per_s']:.1f} | {run['ttft_p50_s']:.2f} s | {run['ttft_p95_s']:.2f} s | "
                         f"{memory} |")
    ceilings = ", ".join(f"{fmt} {value:.1f} tokens/s" for fmt, value in results["ceilings"].items())
    lines += ["", f"Decode ceiling of one stream (bandwidth / bytes of weights per token): {ceilings}.", "",
              "| Ratio (same run) | Value |", "|---|---:|"]
    lines += [f"| {name.replace('_', ' ')} | {value:.2f} |" for name, value in results["ratios"].items()]
    return "\n".join(lines) + "\n"


def chart(results: dict, path: Path) -> None:
    figure, axes = plt.subplots(figsize=(8, 5), dpi=120)
    for key, label in labels(results).items():
        system = results["systems"].get(key)
        if system:
            users = [run["users"] for run in system["runs"]]
            measured_between = key != "ui"  # the UI path is measured at 1 and 8 chats only: no line between
            axes.plot(users, [run["aggregate_tokens_per_s"] for run in system["runs"]], marker="o" if measured_between
                      else "s", markersize=6 if measured_between else 8, linestyle="-" if measured_between else "none",
                      label=label)
    for fmt, value in results["ceilings"].items():
        axes.axhline(value, linestyle="--", linewidth=1, color="grey")
        axes.annotate(f"one-stream ceiling, {fmt}", (1, value), textcoords="offset points", xytext=(4, 3),
                      fontsize=8, color="grey")
    axes.set_xscale("log", base=2)
    axes.set_xticks([1, 2, 4, 8])
    axes.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axes.set_xlabel("chats at once")
    axes.set_ylabel("tokens/s, all chats together")
    axes.set_title(f"{results['model']} on {results['machine']['cores']} cores")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write_report(results: dict, folder: Path) -> None:
    results["ratios"] = ratios(results)
    (folder / "results.json").write_text(json.dumps(results, indent=1))
    chart(results, folder / "chart.png")
    (folder / "table.md").write_text(table(results))
