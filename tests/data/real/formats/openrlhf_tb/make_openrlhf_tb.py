"""Write OpenRLHF TensorBoard output with OpenRLHF's own ``TensorboardLogger`` (run once, here).

No public OpenRLHF event file was found, so this feeds the metric dicts of the core tests'
OpenRLHF-style fixture (``tests/core/data/openrlhf_logs.jsonl``: OpenRLHF 0.11.2's key names,
made-up values) through ``openrlhf.utils.logging_utils.TensorboardLogger.log_train``:

    python make_openrlhf_tb.py OUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

FIXTURE = Path(__file__).resolve().parents[4] / "core" / "data" / "openrlhf_logs.jsonl"


def main(out: str) -> None:
    from openrlhf.utils.logging_utils import TensorboardLogger

    args = SimpleNamespace(logger=SimpleNamespace(tensorboard_dir=out, wandb=SimpleNamespace(run_name="run")))
    logger = TensorboardLogger(args)
    for line in FIXTURE.read_text().splitlines():
        d = json.loads(line)
        step = int(d.pop("global_step"))
        logger.log_train(step, d)
    logger.close()


if __name__ == "__main__":
    main(sys.argv[1])
