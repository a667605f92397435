"""The prepared GPU check: run registered parts, each in its own process and time limit, and
append each part's result to one JSON file as it ends (see benchmarks/gpu/README.md).

    python benchmarks/gpu/check.py --out $OUT/gpu_check.json            # every part, GPU sizes
    python benchmarks/gpu/check.py --parts trainer --small --out x.json  # a group, CPU-sized shapes
    python benchmarks/gpu/check.py --list
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REGISTRY, Context, env_paths, project_root  # noqa: E402

#: parts modules, imported in this order (a missing one is skipped: helpers add theirs)
MODULES = ["parts_trainer", "parts_adapters"]


def load_parts() -> None:
    for mod in MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


def machine() -> dict:
    info: dict = {"python": platform.python_version(), "host": platform.node(), "cpus": os.cpu_count()}
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            p = torch.cuda.get_device_properties(0)
            info["gpu"] = p.name
            info["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
    except Exception as exc:  # the record says why
        info["torch_error"] = repr(exc)
    for name in ("transformers", "trl", "datasets", "vllm", "math_verify"):
        try:
            info[name] = getattr(importlib.import_module(name), "__version__", "present")
        except Exception:
            info[name] = None
    return info


def write(path: Path, results: list[dict]) -> None:
    """The whole list, atomically: a part killed later never leaves a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def run_child(name: str, small: bool, result: Path, seconds: float) -> None:
    """In the child process: run one part and write its dict (or its error) to ``result``."""
    env_paths()
    load_parts()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    work = Path(tempfile.mkdtemp(prefix=name.replace(".", "_") + "-"))
    partial = result.with_name("partial.json")
    ctx = Context(device, small, work, project_root(), seconds, partial)
    try:
        out = {"status": "ok", **REGISTRY[name].fn(ctx)}
    except Exception as exc:
        out = {"status": "error", "error": repr(exc)[:2000], "traceback": traceback.format_exc()[-4000:]}
    result.write_text(json.dumps(out, default=str))


def run_part(name: str, small: bool, seconds: float) -> dict:
    """Run a part in a child process (its own session: a timeout kills its children too)."""
    with tempfile.TemporaryDirectory() as d:
        res = Path(d) / "result.json"
        cmd = [sys.executable, __file__, "--child", name, "--result", str(res)] + (
            ["--small"] if small else []
        )
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        try:
            log, _ = proc.communicate(timeout=seconds)
            status = None
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            status = "timeout"
        wall = time.perf_counter() - t0
        out = json.loads(res.read_text()) if res.exists() else {}
        if status:
            out["status"] = status
        elif not out:
            out = {"status": "error", "error": f"child exited {proc.returncode} without a result"}
        partial = Path(d) / "partial.json"
        if out["status"] != "ok" and partial.exists():
            out["partial"] = json.loads(partial.read_text())  # what the part reported before it ended
        tail = (log or "")[-3000:]
        return {"part": name, **out, "part_wall_s": round(wall, 1), "limit_s": seconds, "log_tail": tail}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")) / "gpu_check.json")
    ap.add_argument("--parts", nargs="+", help="part names or groups (default: all)")
    ap.add_argument("--small", action="store_true", help="CPU-sized shapes (tests the check; no targets)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    load_parts()
    if a.child:
        p = REGISTRY[a.child]
        run_child(a.child, a.small, a.result, p.seconds)
        return 0
    sel = [p for p in REGISTRY.values() if not a.parts or p.name in a.parts or p.group in a.parts]
    if a.list:
        for p in sel:
            print(f"{p.name:28s} {p.seconds:5.0f} s  {p.doc}")
        return 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict] = [{"part": "machine", "status": "ok", "small": a.small, **machine()}]
    write(a.out, results)
    bad = 0
    for p in sel:
        limit = (p.small_seconds or 3 * p.seconds) if a.small else p.seconds
        print(f"[gpu-check] {p.name} (limit {limit:.0f} s) ...", flush=True)
        r = run_part(p.name, a.small, limit)
        results.append(r)
        write(a.out, results)
        bad += r["status"] != "ok"
        brief = {k: v for k, v in r.items() if k not in ("log_tail", "traceback")}
        print(f"[gpu-check] {p.name}: {json.dumps(brief, default=str)[:1500]}", flush=True)
        if r["status"] != "ok":
            print(r.get("traceback") or r["log_tail"][-1500:], flush=True)
    print(f"[gpu-check] {len(sel) - bad}/{len(sel)} parts ok; results in {a.out}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
