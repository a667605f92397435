import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr_schedule.theory import adam_hparams_for_batch, lr_for_batch

pos = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False)


def test_rules_at_four_times_the_batch():
    assert lr_for_batch(256, 64, 1e-6, "sqrt") == pytest.approx(2e-6)
    assert lr_for_batch(256, 64, 1e-6, "linear") == pytest.approx(4e-6)
    assert lr_for_batch(256, 64, 1e-6, "constant") == pytest.approx(1e-6)
    assert lr_for_batch(256, 64, 1e-6) == pytest.approx(2e-6)  # sqrt is the default


@given(b=pos, b0=pos, k=pos, lr=pos)
def test_sqrt_rule_composes(b, b0, k, lr):
    """Scaling B0 -> B -> k B equals scaling B0 -> k B (no drift across repeated switches)."""
    two_hops = lr_for_batch(k * b, b, lr_for_batch(b, b0, lr))
    assert two_hops == pytest.approx(lr_for_batch(k * b, b0, lr), rel=1e-9)


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"batch": 0, "base_batch": 64, "base_lr": 1e-6}, "batch"),
        ({"batch": 64, "base_batch": -1, "base_lr": 1e-6}, "base_batch"),
        ({"batch": 64, "base_batch": 64, "base_lr": math.nan}, "base_lr"),
        ({"batch": 64, "base_batch": 64, "base_lr": "x"}, "base_lr"),
        ({"batch": 64, "base_batch": 64, "base_lr": 1e-6, "rule": "cubic"}, "rule"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        lr_for_batch(**kwargs)


def test_adam_hparams_malladi():
    hp = adam_hparams_for_batch(256, 64, 1e-6, beta1=0.9, beta2=0.999, eps=1e-8)
    assert hp.lr == pytest.approx(2e-6)
    # Malladi: 1 - beta scales with kappa = 4
    assert (1 - hp.beta1, 1 - hp.beta2) == (pytest.approx(0.4), pytest.approx(0.004))
    assert hp.eps == pytest.approx(0.5e-8)
    small = adam_hparams_for_batch(16, 64, 1e-6, beta1=0.9, beta2=0.999)
    assert (1 - small.beta1, small.lr) == (pytest.approx(0.025), pytest.approx(0.5e-6))


def test_adam_hparams_clip_and_validate():
    hp = adam_hparams_for_batch(6400, 64, 1e-6, beta1=0.9)
    assert hp.beta1 == 0.0  # (1 - 0.9) x 100 > 1: no averaging left
    same = adam_hparams_for_batch(6400, 64, 1e-6, beta1=0.9, scale_betas=False)
    assert same.beta1 == 0.9 and same.eps == 1e-8
    with pytest.raises(ValueError, match="beta2"):
        adam_hparams_for_batch(64, 64, 1e-6, beta2=1.0)
    with pytest.raises(ValueError, match="eps"):
        adam_hparams_for_batch(64, 64, 1e-6, eps=-1)
