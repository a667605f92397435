"""Write verl's JSONL file logger and TensorBoard output with verl's own ``Tracking`` (run once, here).

No public file of verl's ``file`` logger was found, so this replays the metrics of the real console
excerpt ``../verl_console_taskrunner/qwen2-7b-fsdp2.excerpt.log`` (steps 1, 2, 4, 5, 6, as printed,
3 decimals) through ``verl.utils.tracking.Tracking(default_backend=["file", "tensorboard"])``:

    VERL_FILE_LOGGER_PATH=OUT/metrics.jsonl TENSORBOARD_DIR=OUT/tb python make_verl_logs.py
"""

from __future__ import annotations

import re
from pathlib import Path

EXCERPT = Path(__file__).resolve().parent.parent / "verl_console_taskrunner" / "qwen2-7b-fsdp2.excerpt.log"


def main() -> None:
    from verl.utils.tracking import Tracking

    tracker = Tracking(project_name="verl_grpo_example_gsm8k_record", experiment_name="qwen2_7b_function_rm_re",
                       default_backend=["file", "tensorboard"])
    for line in EXCERPT.read_text(encoding="utf-8").splitlines():
        m = re.search(r"step:(\d+) - (.*)$", line)
        if not m:
            continue
        data = {}
        for pair in m.group(2).split(" - "):
            key, _, value = pair.rpartition(":")
            data[key] = float(value)
        tracker.log(data=data, step=int(m.group(1)))
    del tracker  # closes the writers


if __name__ == "__main__":
    main()
