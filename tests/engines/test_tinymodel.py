import json

import gguf
import pytest

from flowserve.engines.tinymodel import TinyLlamaConfig, corpus, hf_name, write_tiny_hf, write_tiny_llama
from flowserve.errors import ConfigError
from flowserve.tokenize.text import LocalTokenizer


def test_same_seed_same_bytes_other_seed_differs(tmp_path):
    a = write_tiny_llama(tmp_path / "a.gguf")
    b = write_tiny_llama(tmp_path / "b.gguf")
    c = write_tiny_llama(tmp_path / "c.gguf", TinyLlamaConfig(seed=1))
    assert a.gguf.read_bytes() == b.gguf.read_bytes()
    assert a.tokenizer_json.read_text() == b.tokenizer_json.read_text()
    assert a.gguf.read_bytes() != c.gguf.read_bytes()
    assert a.gguf.stat().st_size < 4_000_000


def test_gguf_declares_a_llama_with_the_tokenizer_vocabulary(tmp_path):
    cfg = TinyLlamaConfig(n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128)
    model = write_tiny_llama(tmp_path / "m.gguf", cfg)
    reader = gguf.GGUFReader(model.gguf)
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    assert len(reader.tensors) == 3 + 9 * cfg.n_layer
    tokens = reader.fields["tokenizer.ggml.tokens"]
    assert len(tokens.data) == model.vocab_size
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert list(embd.shape) == [cfg.n_embd, model.vocab_size]  # ggml order: (n_embd, n_vocab)


def test_tokenizer_round_trips_text_and_merges_frequent_words(tmp_path):
    model = write_tiny_llama(tmp_path / "t.gguf")
    tok = LocalTokenizer(model.tokenizer_json)
    text = "select count(*) from loan where amount > 42; héllo ☃"
    ids = tok.encode_sync(text)
    assert max(ids) < model.vocab_size
    assert tok.decode_sync(ids) == text
    assert len(tok.encode_sync(" select")) == 1  # a corpus word became one token
    assert len(ids) < len(text.encode())


def test_corpus_is_seeded():
    assert corpus(3, 50) == corpus(3, 50)
    assert corpus(3, 50) != corpus(4, 50)


def test_config_rejects_inconsistent_sizes():
    with pytest.raises(ConfigError, match="multiple of n_head_kv"):
        TinyLlamaConfig(n_head=4, n_head_kv=3)
    with pytest.raises(ConfigError, match="multiple of n_head"):
        TinyLlamaConfig(n_embd=130)
    with pytest.raises(ConfigError, match="vocab_size"):
        TinyLlamaConfig(vocab_size=100)


def test_hugging_face_folder_holds_the_same_model(tmp_path):
    from safetensors.numpy import load_file

    cfg = TinyLlamaConfig(n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96)
    hf = write_tiny_hf(tmp_path / "hf", cfg)
    gg = write_tiny_llama(tmp_path / "t.gguf", cfg)
    assert hf.vocab_size == gg.vocab_size
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["num_hidden_layers"] == 2
    assert (config["hidden_size"], config["num_key_value_heads"], config["vocab_size"]) == (64, 2, hf.vocab_size)
    tensors = load_file(str(hf.gguf))
    assert len(tensors) == 3 + 9 * 2
    assert tensors["model.layers.1.self_attn.k_proj.weight"].shape == (32, 64)  # 2 KV heads of 16
    assert tensors["lm_head.weight"].shape == (hf.vocab_size, 64)
    reader = gguf.GGUFReader(str(gg.gguf))
    q = next(t for t in reader.tensors if t.name == "blk.0.attn_q.weight")
    assert abs(float(q.data.astype("float32").sum()) - float(tensors[hf_name(q.name)].sum())) < 1e-3
    tok_cfg = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "PreTrainedTokenizerFast" and tok_cfg["eos_token"] == "<|eos|>"


def test_hf_names():
    assert hf_name("blk.3.attn_q.weight") == "model.layers.3.self_attn.q_proj.weight"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("output.weight") == "lm_head.weight"
