"""How much memory a Qwen model needs here: its weights, the KV cache for the chats it serves, and the runtime.

Computed from a model's `config.json` (its shape), never typed by hand: the pre-start check
(`modelprep.preflight`) and the table in docs/deployment.md (`python -m modelprep.sizing`) both use `memory_needed`.
The runtime figure is measured, not derived. Knows nothing of vLLM or the app.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
# Beside weights and KV cache: the web process (1 GiB) and vLLM's engine-core process, which runs the model
# (Python, torch, oneDNN kernels, activations): PSS over the app's process tree minus weights and KV cache, as
# measured (docs/design-figures.md), rounded up.
RUNTIME_BYTES = int(3 * GIB)
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
INT4_GROUP = 128  # weights per scale in 4-bit layers (modelprep.quantization.int4)
# Tokens per KV-cache block: vLLM caches and shares whole blocks of a prompt, so a persona's system prompt
# (about 80 tokens) is shared by every chat only with blocks smaller than vLLM's 128 on CPU.
KV_BLOCK_TOKENS = 32


@dataclass(frozen=True)
class ModelShape:
    """What sizes a decoder-only Qwen model: the fields of its `config.json`."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    head_dim: int = 0  # 0 = hidden / heads, as in Qwen2 configs that omit it

    @classmethod
    def from_config(cls, config: dict) -> ModelShape:
        return cls(config["num_hidden_layers"], config["hidden_size"], config["num_attention_heads"],
                   config.get("num_key_value_heads", config["num_attention_heads"]), config["intermediate_size"],
                   config["vocab_size"], bool(config.get("tie_word_embeddings", False)), config.get("head_dim") or 0)

    @property
    def attention_dim(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def linear_rows_and_parameters(self) -> tuple[int, int]:
        """Output rows and parameters of the linear layers `modelprep.quantization` makes int8: the decoder's, and the
        output head unless it is tied."""
        q, kv = self.heads * self.attention_dim, self.kv_heads * self.attention_dim
        shapes = [(q, self.hidden), (kv, self.hidden), (kv, self.hidden), (self.hidden, q),
                  (self.intermediate, self.hidden), (self.intermediate, self.hidden), (self.hidden, self.intermediate)]
        head = 0 if self.tied_embeddings else self.vocab
        return (self.layers * sum(rows for rows, _ in shapes) + head,
                self.layers * sum(rows * columns for rows, columns in shapes) + head * self.hidden)

    def other_parameters(self) -> int:
        """Embeddings (the output head too where tied), norms and attention biases: kept in 16 bits."""
        q, kv = self.heads * self.attention_dim, self.kv_heads * self.attention_dim
        per_layer = 2 * self.hidden + q + 2 * kv
        return self.vocab * self.hidden + self.layers * per_layer + self.hidden

    def parameters(self) -> int:
        return self.linear_rows_and_parameters()[1] + self.other_parameters()


def weight_bytes(shape: ModelShape, weights: str, dtype: str = "bfloat16") -> int:
    """Bytes of weights in memory: `weights` is "int8" (linear layers int8 with a scale per row), "int4" (the
    decoder's linear layers 4-bit with a scale per 128 weights, an untied head int8) or "original"."""
    element = DTYPE_BYTES[dtype]
    if weights not in ("int8", "int4"):
        return shape.parameters() * element
    rows, linear = shape.linear_rows_and_parameters()
    if weights == "int8":
        return linear + rows * element + shape.other_parameters() * element
    head = 0 if shape.tied_embeddings else shape.vocab
    decoder = linear - head * shape.hidden
    return decoder // 2 + decoder // INT4_GROUP * element + head * (shape.hidden + element) + (
        shape.other_parameters() * element)


def kv_cache_bytes(shape: ModelShape, tokens: int, dtype: str = "bfloat16") -> int:
    """Keys and values of `tokens` tokens over every layer."""
    return 2 * shape.layers * shape.kv_heads * shape.attention_dim * DTYPE_BYTES[dtype] * tokens


def kv_cache_for_chats(shape: ModelShape, chats: int, context: int, dtype: str = "bfloat16") -> int:
    """The KV cache `chats` chats of `context` tokens each fill: vLLM keeps each chat's tokens in whole
    blocks of `KV_BLOCK_TOKENS`, so a chat's last block counts whole."""
    blocks_per_chat = -(-context // KV_BLOCK_TOKENS)
    return kv_cache_bytes(shape, chats * blocks_per_chat * KV_BLOCK_TOKENS, dtype)


def kv_cache_budget(config: dict, chats: int, context: int, dtype: str, setting_gib: float) -> int:
    """The KV cache the engine allocates: `CHAT_KV_CACHE_GIB` when set, else enough for every chat at full
    context (`CHAT_MAX_CONCURRENT_REPLIES` x `CHAT_MAX_MODEL_LEN`) of the model `config` describes."""
    if setting_gib:
        return int(setting_gib * GIB)
    return kv_cache_for_chats(ModelShape.from_config(config), chats, context, dtype)


def memory_needed(weights: int, kv_cache: int) -> int:
    """Bytes the whole app needs: weights and KV cache as computed above, plus the measured runtime."""
    return weights + kv_cache + RUNTIME_BYTES


# From each model's published config.json (Qwen2.5 family).
QWEN = {
    "Qwen2.5-0.5B-Instruct": ModelShape(24, 896, 14, 2, 4864, 151_936, True),
    "Qwen2.5-1.5B-Instruct": ModelShape(28, 1536, 12, 2, 8960, 151_936, True),
    "Qwen2.5-7B-Instruct": ModelShape(28, 3584, 28, 4, 18_944, 152_064, False),
    "Qwen2.5-14B-Instruct": ModelShape(48, 5120, 40, 8, 13_824, 152_064, False),
}
CASES = [(1, 4096), (8, 4096), (1, 32_768), (8, 32_768)]  # (chats, context tokens each)


def memory_table() -> str:
    """The table in docs/deployment.md: GiB needed per model and weight format, for 1 and 8 chats at 4k and 32k context."""
    lines = ["| model | weights | weights GiB | " + " | ".join(f"{chats} chat{'s' * (chats > 1)} × {context // 1024}k"
                                                              for chats, context in CASES) + " |",
             "|---|---|---:|" + "---:|" * len(CASES)]
    for name, shape in QWEN.items():
        for weights, label in (("int4", "int4"), ("int8", "int8"), ("original", "bf16")):
            weight = weight_bytes(shape, weights)
            needed = [memory_needed(weight, kv_cache_bytes(shape, chats * context)) for chats, context in CASES]
            lines.append(f"| {name} | {label} | {weight / GIB:.1f} | "
                         + " | ".join(f"{total / GIB:.1f}" for total in needed) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(memory_table())
