"""A tiny random-weight Llama written as GGUF, so tests and benchmarks need no download.

    model = write_tiny_llama(Path("out/tiny.gguf"))   # TinyModel(gguf, tokenizer_json, vocab_size)

The vocabulary is a byte-level BPE (GPT-2 style) trained with `tokenizers` on a corpus
generated from a built-in word list with a seeded RNG, so the same seed gives the same
bytes. The GGUF declares `tokenizer.ggml.model = gpt2` with the same tokens and merges,
and the matching `tokenizer.json` is written next to it: llama-server's `/tokenize` and
`tokenizers` then agree token for token (the live router can use either). The chat
template (`CHAT_TEMPLATE`: roles as plain text, tools and tool calls as JSON) is in the
GGUF and in a `tokenizer_config.json` beside it, so chats render alike locally and in
llama-server. Weights are
normal(0, 0.02) from numpy, matrices in float16; outputs are random tokens, which is all a
load test needs. With the default sizes the file is about 1 MB and a 3k-token prefill
takes a few hundred milliseconds on one CPU thread — long enough for prefix caching to
matter. CLI: `flowserve engines tiny-model --out PATH`.

`write_tiny_hf(folder)` writes the same model (same weights and vocabulary) in Hugging
Face format for engines that load no GGUF (vLLM): `model.safetensors`, `config.json`
(LlamaForCausalLM) and a fast tokenizer (`tokenizer.json`, `tokenizer_config.json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from flowserve.errors import ConfigError

BOS, EOS = "<|bos|>", "<|eos|>"
# Plain-text roles (no special tokens), so chat prompts tokenize like any text; tools,
# tool calls and tool results are rendered as JSON, so tool chats show them to the model.
CHAT_TEMPLATE = (
    "{% if tools %}system: tools: {{ tools | tojson }}\n{% endif %}"
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] or '' }}"
    "{% if m['tool_calls'] %} calls: {{ m['tool_calls'] | tojson }}{% endif %}"
    "{% if m['tool_call_id'] %} (result of {{ m['tool_call_id'] }}){% endif %}{{ '\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
_WORD_TEXT = (
    "select from where join on group by order having limit count sum avg min max distinct as and or not "
    "null is in between like case when then else end table column schema database index key primary "
    "foreign value values insert update delete create the a an of to for with by is are was were be has "
    "have this that these those it its their there which who what how many much most least each every "
    "account client loan district card order transaction payment amount date year month day name id "
    "race driver circuit lap time result season constructor points position status number question "
    "answer evidence hint sql query candidate revision test unit evaluate keyword extract retrieve "
    "information prompt model token cache prefix request response first last total average per user"
)


@dataclass(frozen=True)
class TinyLlamaConfig:
    vocab_size: int = 1024  # upper bound: BPE stops when the corpus has no more merges
    n_embd: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 384
    context_length: int = 16384
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.n_embd, self.n_layer, self.n_head, self.n_head_kv, self.n_ff, self.context_length) < 1:
            raise ConfigError(f"tiny model: sizes must be positive: {self}")
        if self.n_embd % self.n_head or self.n_head % self.n_head_kv:
            raise ConfigError(f"tiny model: n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head}) "
                              f"and n_head a multiple of n_head_kv ({self.n_head_kv})")
        if self.vocab_size <= 258:
            raise ConfigError("tiny model: vocab_size must exceed 258 (256 byte tokens and two specials)")


@dataclass(frozen=True)
class TinyModel:
    gguf: Path
    tokenizer_json: Path
    vocab_size: int
    name: str = "tiny-llama"
    tokenizer_config: Path | None = None  # with the chat template (the GGUF carries it too)


def corpus(seed: int, sentences: int = 2000) -> list[str]:
    """Seeded sentences over the built-in words, with numbers and punctuation."""
    rng = np.random.default_rng(seed)
    words_list = _WORD_TEXT.split()
    out = []
    for _ in range(sentences):
        words = rng.choice(words_list, size=int(rng.integers(4, 16)))
        text = " ".join(words)
        if rng.random() < 0.3:
            text += f" = {int(rng.integers(0, 10_000))}"
        out.append(text + rng.choice([".", "?", ",", ";", ""]))
    return out


def build_tokenizer(config: TinyLlamaConfig):  # -> tokenizers.Tokenizer
    """Byte-level BPE trained on `corpus(seed)`; specials BOS/EOS get ids 0 and 1."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size, min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[BOS, EOS])
    tok.train_from_iterator(corpus(config.seed), trainer)
    return tok


def _weights(config: TinyLlamaConfig, n_vocab: int) -> dict[str, np.ndarray]:
    """Llama tensors in GGUF naming; numpy shapes are (out_features, in_features)."""
    rng = np.random.default_rng(config.seed)
    e, hd = config.n_embd, config.n_embd // config.n_head
    q, kv, ff = config.n_head * hd, config.n_head_kv * hd, config.n_ff

    def mat(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    def ones() -> np.ndarray:
        return np.ones(e, dtype=np.float32)

    out = {"token_embd.weight": mat(n_vocab, e), "output_norm.weight": ones(), "output.weight": mat(n_vocab, e)}
    for i in range(config.n_layer):
        out |= {
            f"blk.{i}.attn_norm.weight": ones(),
            f"blk.{i}.attn_q.weight": mat(q, e),
            f"blk.{i}.attn_k.weight": mat(kv, e),
            f"blk.{i}.attn_v.weight": mat(kv, e),
            f"blk.{i}.attn_output.weight": mat(e, q),
            f"blk.{i}.ffn_norm.weight": ones(),
            f"blk.{i}.ffn_gate.weight": mat(ff, e),
            f"blk.{i}.ffn_up.weight": mat(ff, e),
            f"blk.{i}.ffn_down.weight": mat(e, ff),
        }
    return out


def write_tiny_llama(path: Path, config: TinyLlamaConfig | None = None, name: str = "tiny-llama") -> TinyModel:
    """Write the GGUF at `path` and its tokenizer at `path` with suffix `.tokenizer.json`."""
    import gguf

    config = config or TinyLlamaConfig()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(config)
    spec = json.loads(tok.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    assert [vocab[t] for t in tokens] == list(range(len(tokens))), "BPE ids must be dense"
    merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
    specials = {BOS, EOS}

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(name)
    w.add_context_length(config.context_length)
    w.add_embedding_length(config.n_embd)
    w.add_block_count(config.n_layer)
    w.add_feed_forward_length(config.n_ff)
    w.add_head_count(config.n_head)
    w.add_head_count_kv(config.n_head_kv)
    w.add_rope_dimension_count(config.n_embd // config.n_head)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.CONTROL if t in specials else gguf.TokenType.NORMAL for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab[BOS])
    w.add_eos_token_id(vocab[EOS])
    w.add_add_bos_token(False)  # keep /tokenize identical to tokenizer.json (no post-processor)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)
    for tensor_name, array in _weights(config, len(tokens)).items():
        w.add_tensor(tensor_name, array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    tokenizer_json = path.with_suffix(".tokenizer.json")
    tok.save(str(tokenizer_json))
    config_path = path.with_suffix(".tokenizer_config.json")
    config_path.write_text(json.dumps(_tokenizer_config(config), indent=2))
    return TinyModel(path, tokenizer_json, len(tokens), name, config_path)


def _tokenizer_config(config: TinyLlamaConfig) -> dict[str, object]:
    """Hugging Face's tokenizer settings, with the chat template."""
    return {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS,
            "add_bos_token": False, "add_eos_token": False, "model_max_length": config.context_length,
            "chat_template": CHAT_TEMPLATE}


# GGUF tensor name → Hugging Face Llama name ({i}: the block)
_HF_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
             "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
             "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
             "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_name(gguf_name: str) -> str:
    """`blk.3.attn_q.weight` → `model.layers.3.self_attn.q_proj.weight`."""
    parts = gguf_name.split(".")
    if parts[0] == "blk":
        return f"model.layers.{parts[1]}.{_HF_NAMES[parts[2]]}.{parts[3]}"
    return f"{_HF_NAMES[parts[0]]}.{parts[1]}"


def write_tiny_hf(folder: Path, config: TinyLlamaConfig | None = None, name: str = "tiny-llama") -> TinyModel:
    """The tiny Llama as a Hugging Face folder (float32 weights: CPU engines need no f16)."""
    from safetensors.numpy import save_file

    config = config or TinyLlamaConfig()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(config)
    n_vocab = tok.get_vocab_size()
    tensors = {hf_name(k): np.ascontiguousarray(v, dtype=np.float32) for k, v in _weights(config, n_vocab).items()}
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    hf_config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": n_vocab,
        "hidden_size": config.n_embd, "intermediate_size": config.n_ff, "num_hidden_layers": config.n_layer,
        "num_attention_heads": config.n_head, "num_key_value_heads": config.n_head_kv,
        "head_dim": config.n_embd // config.n_head, "max_position_embeddings": config.context_length,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
        "bos_token_id": tok.token_to_id(BOS), "eos_token_id": tok.token_to_id(EOS), "torch_dtype": "float32",
    }
    (folder / "config.json").write_text(json.dumps(hf_config, indent=2))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": hf_config["bos_token_id"], "eos_token_id": hf_config["eos_token_id"]}))
    tokenizer_json = folder / "tokenizer.json"
    tok.save(str(tokenizer_json))
    (folder / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(config), indent=2))
    return TinyModel(folder / "model.safetensors", tokenizer_json, n_vocab, name, folder / "tokenizer_config.json")
