"""W&B CSV exports in W&B's two layouts, from committed logs (run once, here; labelled: not public files).

- ``history_trl.csv``: a run-history export as ``wandb.Api().run(...).history().to_csv(path)`` writes
  it (pandas, with its unnamed index column): the HF W&B callback's names (``train/reward``,
  ``train/global_step``, ``_step``, ``_runtime``) for ``../trl_local/trainer_state.json``.
- ``chart_reward.csv``: a line-chart panel's "Export CSV": ``Step``, ``<run> - <key>``,
  ``<run> - <key>__MIN``, ``<run> - <key>__MAX`` for two runs on one x-axis (blank where a run has
  no point): the TRL run's ``train/reward`` and the verl excerpt's ``critic/score/mean``.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    import pandas as pd

    state = json.loads((HERE.parent / "trl_local" / "trainer_state.json").read_text())
    rows = []
    for i, entry in enumerate(e for e in state["log_history"] if "reward" in e):
        row = {f"train/{k}": v for k, v in entry.items() if k not in ("step", "epoch")}
        row.update({"train/global_step": entry["step"], "train/epoch": entry["epoch"], "_step": i,
                    "_runtime": 1.0 + 0.3 * i, "_timestamp": 1796294838.0 + 0.3 * i})
        rows.append(row)
    pd.DataFrame(rows).to_csv(HERE / "history_trl.csv")

    trl = {e["step"]: e["reward"] for e in state["log_history"] if "reward" in e}
    verl = {}
    excerpt = HERE.parent / "verl_console_taskrunner" / "qwen2-7b-fsdp2.excerpt.log"
    for line in excerpt.read_text(encoding="utf-8").splitlines():
        m = re.search(r"step:(\d+) - .*critic/score/mean:([0-9.]+)", line)
        if m:
            verl[int(m.group(1))] = float(m.group(2))
    a, b = "trl-tiny-grpo - train/reward", "qwen2_7b_function_rm_re - critic/score/mean"
    with open(HERE / "chart_reward.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Step", a, a + "__MIN", a + "__MAX", b, b + "__MIN", b + "__MAX"])
        for step in sorted(set(trl) | set(verl)):
            ra, rb = trl.get(step, ""), verl.get(step, "")
            w.writerow([step, ra, ra, ra, rb, rb, rb])


if __name__ == "__main__":
    main()
