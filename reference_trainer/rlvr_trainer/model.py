"""The embedded default policy: a tiny Qwen2 model with a character tokenizer, warm-started locally.

Nothing is downloaded. The tokenizer maps each character of the arithmetic task to one token; the
model is a 2-layer Qwen2 (hidden 128, 4 heads: vLLM's CPU attention needs head_dim >= 32) with
untied embeddings (vLLM keeps a stale ``lm_head`` for tied models on weight reload).

The warm start is a short supervised pass (fixed seed) on the generated task in which only one
answer in five (``boxed_fraction``) is written as ``\\boxed{..}``, the rest bare. The policy so
knows the arithmetic of the default task (greedy: right on 100% of one-digit sums and 94% of
two-digit + one-digit, always bare) but samples broadly (label smoothing: 74% / 50% right at
temperature 1) and boxes only ~19% of its sampled answers, so it starts at a reward of ~0.1. RL then has a
skill shared by every prompt to learn (the format, then sharper answers): the reward rises by
~0.3-0.4 within the demo's budget, far above seed noise, and at the demo's LR the policy collapses
afterwards (entropy exhaustion or a reward crash), so both clocks show. A policy that already boxes
every answer (``boxed_fraction=1``, the earlier default) gains only a few hundredths on this task
(docs/RESULTS.md section 1).

The model is committed with the package (``tiny-qwen2/``: weights, tokenizer, the recipe and the
weights' sha256 in ``warm_start.json``), in Hugging Face format so vLLM loads it from the directory,
and the trainer loads it by default: the same weights on every machine. ``python -m
rlvr_trainer.model`` rebuilds it from the recipe and says whether the build matches the committed
hash (``--update`` replaces it, for a changed recipe); other recipes are built on first use and
cached under ``$RLVR_SCHEDULE_CACHE`` (default ``~/.cache/rlvr-schedule``) as
``tiny-qwen2-<recipe hash>``.

Why committed: a seeded build is not the same on every CPU. PyTorch picks its vectorised CPU
kernels (``torch.backends.cpu.get_cpu_capability()``: AVX512, AVX2 or DEFAULT) from the instruction
set at start-up, and wider vectors add in another order, so the low bits of a reduction differ. Measured
with torch 2.13.0 (CPU wheel) and transformers 5.19.0 on an AMD EPYC with AVX-512, 2026-12-07, after 50
warm-start steps: bit-identical weights at ``OMP_NUM_THREADS`` 1 and 2, with oneDNN off
(``torch.backends.mkldnn.enabled = False``), with MKL held to AVX2 (``MKL_ENABLE_INSTRUCTIONS=AVX2``)
and with oneDNN held to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``); with ATen's kernels held to AVX2
(``ATEN_CPU_CAPABILITY=avx2``) 97% of the parameters differ (by up to 2.7e-5, 1.9e-4 of their norm),
and with its scalar kernels (``default``) the seeded initialisation already differs (by up to 4e-8).
The warm start amplifies these: after its 800 steps the AVX2 build is another model (parameters
differ by up to 0.26, final loss 0.645 against 0.693), with the sha256 78e6f34a6aaf71be... that a
machine without AVX-512 built, where the committed AVX512 build is 561b49d60e1f07fa.... RL runs on
the two models differ from the first update, and so do the rewards, the gradient-noise estimate and
any threshold a schedule reads from them.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CHARS",
    "EMBEDDED_DIR",
    "TinyModelConfig",
    "build_tokenizer",
    "build_model",
    "build_tiny_model",
    "embedded_model_dir",
    "ensure_tiny_model",
    "cache_root",
]

#: Every character the arithmetic task and its ``\boxed{}`` answers use.
CHARS = "0123456789+-*=()\\boxed{} Q:A"
PAD, EOS, UNK = "<pad>", "</s>", "<unk>"

#: The committed build of the current recipe (package data): config, weights, tokenizer and
#: ``warm_start.json`` (the recipe, the weights' sha256, what built them).
EMBEDDED_DIR = Path(__file__).resolve().parent / "tiny-qwen2"


@dataclass(frozen=True)
class TinyModelConfig:
    """Architecture and warm-start recipe; its hash names the cache directory."""

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    intermediate_size: int = 256
    max_position: int = 64
    warm_steps: int = 800
    warm_batch: int = 64
    warm_lr: float = 3e-3
    label_smoothing: float = 0.03
    boxed_fraction: float = 0.2  # share of warm-start answers written as \boxed{..} (else bare)
    seed: int = 0
    version: int = 3  # bump when the recipe changes

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]


def cache_root() -> Path:
    """``$RLVR_SCHEDULE_CACHE`` or ``~/.cache/rlvr-schedule``."""
    return Path(os.environ.get("RLVR_SCHEDULE_CACHE", Path.home() / ".cache" / "rlvr-schedule"))


def build_tokenizer():
    """A character-level ``PreTrainedTokenizerFast`` (saved beside the model for vLLM)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {PAD: 0, EOS: 1, UNK: 2}
    for ch in dict.fromkeys(CHARS):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=64,
    )


def build_model(cfg: TinyModelConfig, vocab_size: int, *, eos_id: int = 1, pad_id: int = 0):
    """A randomly initialised tiny Qwen2 causal LM in float32."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(cfg.seed)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_position,
        tie_word_embeddings=False,
        eos_token_id=eos_id,
        bos_token_id=eos_id,
        pad_token_id=pad_id,
        torch_dtype="float32",
        use_sliding_window=False,
    )
    return Qwen2ForCausalLM(config).float()


def warm_start(model, tokenizer, cfg: TinyModelConfig, *, progress: bool = False) -> dict[str, Any]:
    """Supervised pass on ``prompt + answer`` strings, the answer boxed with probability
    ``cfg.boxed_fraction``; returns the loss trace's ends.

    Stops short of solving the task: the mix leans on hard problems that a few hundred steps
    only partly learn (see :func:`rlvr_trainer.tasks.arithmetic_problem`). Label smoothing leaves
    the sampling distribution broad (greedy answers beat sampled ones), and the rarely boxed
    format gives RL a direction shared by every prompt: both clocks are visible.
    """
    import torch

    from rlvr_trainer.tasks import ArithmeticTask

    task = ArithmeticTask(seed=cfg.seed + 1)
    rng = random.Random(cfg.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.warm_lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * max(0.1, 1 - s / cfg.warm_steps)
    )
    model.train()
    losses = []
    steps = range(cfg.warm_steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="warm start", leave=False)
    for _ in steps:
        probs = [task.problem(rng.randrange(1 << 30)) for _ in range(cfg.warm_batch)]
        texts = [
            p.prompt + (p.solution if rng.random() < cfg.boxed_fraction else p.answer) + EOS for p in probs
        ]
        enc = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        plen = [len(tokenizer(p.prompt, add_special_tokens=False)["input_ids"]) for p in probs]
        width = max(map(len, enc))
        ids = torch.full((len(enc), width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full_like(ids, -100)
        attn = torch.zeros_like(ids)
        for i, (e, n) in enumerate(zip(enc, plen, strict=True)):
            ids[i, : len(e)] = torch.tensor(e)
            attn[i, : len(e)] = 1
            labels[i, n : len(e)] = torch.tensor(e[n:])
        logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]),
            labels[:, 1:].reshape(-1),
            ignore_index=-100,
            label_smoothing=cfg.label_smoothing,
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return {"loss_first": losses[0], "loss_last": sum(losses[-10:]) / min(10, len(losses))}


def sha256_of(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def build_tiny_model(cfg: TinyModelConfig, out: Path, *, progress: bool = False) -> Path:
    """Build the model of ``cfg`` from scratch into ``out`` (which must not exist yet).

    Written to a temporary directory beside ``out`` and renamed into place, so a half-built model
    is never picked up by a concurrent or later run; if another process got there first, its copy
    stays. ``warm_start.json`` records the recipe, the loss trace's ends, the weights' sha256 and
    what built them (the library versions and CPU kernels that decide the low bits).
    """
    import platform
    import shutil
    import tempfile

    import torch
    import transformers

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer()
    with torch.random.fork_rng():
        model = build_model(cfg, len(tok), eos_id=tok.eos_token_id, pad_id=tok.pad_token_id)
        stats = warm_start(model, tok, cfg, progress=progress)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".tmp", dir=out.parent))
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    meta = {
        "config": asdict(cfg),
        **stats,
        "sha256": {"model.safetensors": sha256_of(tmp / "model.safetensors")},
        "built_with": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
        },
    }
    (tmp / "warm_start.json").write_text(json.dumps(meta, indent=2) + "\n")
    try:
        os.replace(tmp, out)
    except OSError:  # another process won the race: use its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def embedded_model_dir(*, verify: bool = True) -> Path:
    """The committed default model (package data), its weights checked against their sha256.

    Raises ``RuntimeError`` naming the file when the weights are missing or differ from the hash
    in ``warm_start.json`` (e.g. a Git LFS pointer, a partial checkout, a hand-edited file).
    """
    meta_path = EMBEDDED_DIR / "warm_start.json"
    weights = EMBEDDED_DIR / "model.safetensors"
    if not (meta_path.exists() and weights.exists() and (EMBEDDED_DIR / "config.json").exists()):
        raise RuntimeError(
            f"the embedded model is incomplete: {EMBEDDED_DIR} needs config.json, model.safetensors "
            "and warm_start.json (package data of rlvr_trainer; `python -m rlvr_trainer.model "
            "--update` rebuilds them)"
        )
    if verify:
        want = json.loads(meta_path.read_text())["sha256"]["model.safetensors"]
        got = sha256_of(weights)
        if got != want:
            raise RuntimeError(
                f"{weights}: sha256 {got} differs from the {want} recorded in {meta_path} "
                "(field sha256.model.safetensors)"
            )
    return EMBEDDED_DIR


def embedded_recipe() -> TinyModelConfig:
    """The recipe the committed model was built with."""
    return TinyModelConfig(**json.loads((EMBEDDED_DIR / "warm_start.json").read_text())["config"])


def ensure_tiny_model(
    cfg: TinyModelConfig | None = None, *, root: Path | None = None, progress: bool = False
) -> Path:
    """Path of the tiny model of ``cfg`` (default: the current recipe).

    The committed model when its recipe is ``cfg`` and no ``root`` is given (what the trainer
    loads by default: the same weights on every machine); otherwise built on first use and cached
    under ``root`` (default :func:`cache_root`) as ``tiny-qwen2-<recipe hash>``.
    """
    cfg = cfg or TinyModelConfig()
    if root is None and (EMBEDDED_DIR / "warm_start.json").exists() and embedded_recipe() == cfg:
        return embedded_model_dir()
    root = Path(root) if root is not None else cache_root()
    path = root / f"tiny-qwen2-{cfg.key()}"
    if (path / "config.json").exists() and (path / "model.safetensors").exists():
        return path
    return build_tiny_model(cfg, path, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """``python -m rlvr_trainer.model``: build the current recipe afresh on this machine and say
    whether the weights match the committed ones bit for bit; ``--update`` replaces the committed
    model with the build (for a changed recipe; commit the directory with the change)."""
    import argparse
    import shutil
    import tempfile

    ap = argparse.ArgumentParser(prog="python -m rlvr_trainer.model", description=main.__doc__)
    ap.add_argument("--out", type=Path, help="keep the build here (default: a temporary directory)")
    ap.add_argument("--update", action="store_true", help=f"write the build to {EMBEDDED_DIR.name}/")
    args = ap.parse_args(argv)
    cfg = TinyModelConfig()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp) / "tiny-qwen2"
        if out.exists():
            ap.error(f"--out {out} already exists")
        build_tiny_model(cfg, out, progress=True)
        got = sha256_of(out / "model.safetensors")
        print(f"built {out} (recipe {cfg.key()}): model.safetensors sha256 {got}")
        try:
            want = json.loads((EMBEDDED_DIR / "warm_start.json").read_text())["sha256"]["model.safetensors"]
            same_recipe = embedded_recipe() == cfg
        except (OSError, KeyError, TypeError, ValueError):
            want, same_recipe = None, False
        if want is None:
            print("no committed model to compare with")
        elif want == got:
            print("matches the committed model bit for bit")
        elif same_recipe:
            print(
                f"differs from the committed model ({want}) built from the same recipe: this machine's "
                "floating-point kernels or library versions round differently (see the module's notes)"
            )
        else:
            print("the recipe differs from the committed model's")
        if args.update:
            shutil.rmtree(EMBEDDED_DIR, ignore_errors=True)
            shutil.copytree(out, EMBEDDED_DIR)
            print(f"wrote {EMBEDDED_DIR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
