"""The embedded-task runner: candidates' runs in the planned order, finished runs skipped, the
budget ledger stops it and carries over to the next call."""

from __future__ import annotations

import benchmarks.evidence.embedded_task as et


def test_runner_skips_finished_runs_and_stops_at_the_budget(tmp_path, monkeypatch):
    import rlvr_trainer.experiments.rundirs as rundirs
    import rlvr_trainer.experiments.runs as runs

    done = {str(et.run_dir(tmp_path, et.CANDIDATES[0], 4e-4, 8, 0))}
    calls = []
    monkeypatch.setattr(rundirs, "finished", lambda d, cfg: str(d) in done)

    def fake_run_one(cfg, d, **kw):
        assert cfg.eval_every > 0 and cfg.max_samples == et.MAX_SAMPLES
        calls.append((cfg.base_lr, cfg.batch, cfg.seed))
        done.add(str(d))

    monkeypatch.setattr(runs, "run_one", fake_run_one)
    ledger = et.Ledger(tmp_path / "ledger.json")
    c = et.CANDIDATES[0]
    assert et.run_stage(tmp_path, c, c.lrs[:1], ledger, hours=6)
    assert len(calls) == 14 and calls[0] == (4e-4, 16, 0)  # b8-s0 had finished
    assert calls == [(4e-4, b, s) for s in et.SEEDS for b in et.BATCHES][1:]
    # an exhausted ledger starts nothing, and it persists across calls
    ledger.add("elsewhere", 6 * 3600)
    assert not et.run_stage(tmp_path, c, c.lrs[1:], et.Ledger(tmp_path / "ledger.json"), hours=6)
    assert len(calls) == 14
    cfg = et.config(et.CANDIDATES[2], 0.05, 8, 1)
    assert cfg.optimizer == "sgd" and cfg.task_max_level is None and cfg.lr_rule == "linear"
