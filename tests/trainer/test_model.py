"""The embedded model: the committed weights (their hash, loaded by default) and the warm start that
built them (reproducible on one machine, its share of boxed answers is what RL learns)."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import asdict

import pytest

from rlvr_trainer import model as tiny
from rlvr_trainer.model import EMBEDDED_DIR, TinyModelConfig, ensure_tiny_model


def test_the_committed_weights_match_their_recorded_hash():
    meta = json.loads((EMBEDDED_DIR / "warm_start.json").read_text())
    digest = hashlib.sha256((EMBEDDED_DIR / "model.safetensors").read_bytes()).hexdigest()
    assert digest == meta["sha256"]["model.safetensors"]
    assert meta["config"] == asdict(TinyModelConfig())  # built from the current recipe
    for name in ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        assert (EMBEDDED_DIR / name).exists(), name


def test_the_committed_model_loads_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("RLVR_SCHEDULE_CACHE", str(tmp_path / "cache"))
    assert ensure_tiny_model() == EMBEDDED_DIR  # nothing built, nothing cached
    assert ensure_tiny_model(TinyModelConfig()) == EMBEDDED_DIR
    assert not (tmp_path / "cache").exists()
    from transformers import AutoConfig, AutoTokenizer

    from rlvr_trainer.model import CHARS

    assert AutoConfig.from_pretrained(EMBEDDED_DIR).hidden_size == TinyModelConfig().hidden_size
    assert len(AutoTokenizer.from_pretrained(EMBEDDED_DIR)) == 3 + len(dict.fromkeys(CHARS))


def test_changed_weights_are_refused_with_the_file_named(tmp_path, monkeypatch):
    copy = tmp_path / "tiny-qwen2"
    shutil.copytree(EMBEDDED_DIR, copy)
    data = bytearray((copy / "model.safetensors").read_bytes())
    data[-1] ^= 1  # one bit of the last weight
    (copy / "model.safetensors").write_bytes(bytes(data))
    monkeypatch.setattr(tiny, "EMBEDDED_DIR", copy)
    with pytest.raises(RuntimeError, match=r"model\.safetensors: sha256 .* differs .*warm_start\.json"):
        tiny.ensure_tiny_model()


def _first_tokens(path, n: int = 40) -> list[str]:
    """Greedy completions of the first ``n`` problems of the default task."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr_trainer.tasks import ArithmeticTask

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    probs = [ArithmeticTask(seed=7, max_level=1).problem(i) for i in range(n)]
    enc = tok([p.prompt for p in probs], return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(
            **enc,
            max_new_tokens=10,
            do_sample=False,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    return tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)


@pytest.mark.slow
def test_boxed_fraction_sets_the_format_rl_has_to_learn(tmp_path):
    boxed = ensure_tiny_model(TinyModelConfig(warm_steps=60, boxed_fraction=1.0), root=tmp_path)
    bare = ensure_tiny_model(TinyModelConfig(warm_steps=60, boxed_fraction=0.0), root=tmp_path)
    assert boxed != bare  # the recipe names the cache entry
    assert all(t.startswith("\\boxed{") for t in _first_tokens(boxed))
    assert not any("\\boxed{" in t for t in _first_tokens(bare))
    meta = json.loads((bare / "warm_start.json").read_text())
    assert meta["config"]["boxed_fraction"] == 0.0 and meta["loss_last"] < meta["loss_first"]


@pytest.mark.slow
def test_warm_start_is_reproducible(tmp_path):
    import torch
    from safetensors.torch import load_file

    cfg = TinyModelConfig(warm_steps=5)
    a = load_file(ensure_tiny_model(cfg, root=tmp_path / "a") / "model.safetensors")
    b = load_file(ensure_tiny_model(cfg, root=tmp_path / "b") / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("flip", [False, True])
def test_the_build_command_says_whether_its_build_matches_the_committed_hash(flip, monkeypatch, capsys):
    def fake_build(cfg, out, *, progress=False):  # the warm start itself is tested above
        shutil.copytree(EMBEDDED_DIR, out)
        if flip:
            data = bytearray((out / "model.safetensors").read_bytes())
            data[-1] ^= 1
            (out / "model.safetensors").write_bytes(bytes(data))
        return out

    monkeypatch.setattr(tiny, "build_tiny_model", fake_build)
    assert tiny.main([]) == 0
    out = capsys.readouterr().out
    if flip:
        assert "differs from the committed model" in out and "same recipe" in out
    else:
        assert "matches the committed model bit for bit" in out
