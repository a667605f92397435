"""Shared fixtures: the embedded tiny model (the committed weights) and CPU engine env."""

from __future__ import annotations

import pytest

from rlvr_trainer.rollout import set_cpu_env


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The warm-started tiny Qwen2, committed with the package (the same weights on every machine)."""
    set_cpu_env()
    from rlvr_trainer.model import ensure_tiny_model

    return ensure_tiny_model()


@pytest.fixture
def toy_lm():
    """A factory for an embedding -> linear-head model (no layers) whose logits are computable by
    hand, shaped like a causal LM for the trainer's log-prob path (shared by the hand-checked tests)."""
    from types import SimpleNamespace

    import torch

    class ToyLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(3, 2)
            self.head = torch.nn.Linear(2, 3, bias=False)
            with torch.no_grad():
                self.emb.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
                self.head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
            emb = self.emb

            class _Dec(torch.nn.Module):
                def forward(self, input_ids, attention_mask=None):
                    return SimpleNamespace(last_hidden_state=emb(input_ids))

            self._dec = _Dec()

        def get_decoder(self):
            return self._dec

        def get_output_embeddings(self):
            return self.head

    return ToyLM
