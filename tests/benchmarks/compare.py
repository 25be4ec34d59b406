"""Compare two commits on the same benchmarks, run alternately on this machine: the figures side by side.

A script, not a test. Run from the repository root:

    python3 tests/benchmarks/compare.py BASE [HEAD] [--bench send,api] [--pairs 3] [--send "--dkim rsa"]
    python3 tests/benchmarks/compare.py f2603b3 --bench send --pairs 2 --send "--recipients 50000"
    python3 tests/benchmarks/compare.py f2603b3 --bench send --send "--dkim rsa"

BASE (and HEAD, if given) is any commit git knows. Each is unpacked with `git archive` into a folder of its
own under `--scratch` (default /tmp/tidings-compare/<commit>), with its own virtualenv (`pip install -e
'.[test]'`); both are kept and reused by the next comparison of the same commit. Without HEAD the other
side is this checkout as it is, uncommitted changes included, run with this interpreter: the way to
measure an idea before committing it.

Each benchmark (send, api, events, drain, crash: `tests/benchmarks/<name>.py` of each commit) runs `--pairs`
times per side, alternating in the order base, head, head, base, base, head... (so that a machine
getting busier or quieter during the comparison weighs on both sides alike), each side against its own
database, `<--database-url>_base` and `<--database-url>_head` (created if missing; each benchmark
recreates its schema). Extra arguments for one benchmark are given as one string (`--send "--dkim rsa"`)
and passed to both sides. A benchmark that BASE does not have is skipped with a note.

Each benchmark prints JSON lines; every numeric figure found in both sides' output is printed with each
run's value and head's median over base's (a figure the same in every run, a setting, is only named).
Figures are noisy on a shared machine: compare ratios of several pairs, and read the load averages.
`--json FILE` also writes every run's raw output there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ("send", "api", "events", "drain", "crash")
DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/bench_compare"


def say(message: str) -> None:
    print(f"[compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Side:
    """One commit's copy of the repository and the interpreter that runs its benchmarks."""

    label: str
    root: Path
    python: Path
    commit: str
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    raw: dict[str, list[list[Any]]] = field(default_factory=dict)


def resolve(commit: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def unpack(label: str, commit: str, scratch: Path) -> Side:
    """The commit's tree in `scratch/<sha>` with a virtualenv of its own (reused when already there)."""
    sha = resolve(commit)
    folder = scratch / sha[:12]
    python = folder / ".venv" / "bin" / "python"
    ready = folder / ".compare-ready"
    if not ready.exists():
        say(f"{label}: unpacking {sha[:12]} into {folder}")
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(folder)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {sha} failed")
        say(f"{label}: virtualenv and pip install (a minute or two the first time)")
        subprocess.run([sys.executable, "-m", "venv", str(folder / ".venv")], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", f"{folder}[test]"], check=True)
        ready.write_text(sha + "\n")
    return Side(label, folder, python, sha)


def this_checkout() -> Side:
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    commit = resolve("HEAD")[:12] + (" + uncommitted changes" if dirty else "")
    return Side("head", ROOT, Path(sys.executable), commit)


def database_url(url: str, suffix: str) -> str:
    return f"{url}_{suffix}"


def flatten(value: Any, prefix: str = "") -> dict[str, float]:
    """Every number in a JSON value, by its dotted path (booleans left out: they are not figures)."""
    if isinstance(value, bool):
        return {}
    if isinstance(value, (int, float)):
        return {prefix: float(value)}
    found: dict[str, float] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            found.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.update(flatten(item, f"{prefix}[{index}]"))
    return found


def run_one(side: Side, bench: str, extra: list[str], url: str, timeout: float) -> bool:
    script = side.root / "tests" / "benchmarks" / f"{bench}.py"
    if not script.exists():
        return False
    command = [str(side.python), str(script), "--database-url", database_url(url, side.label), *extra]
    say(f"{side.label} ({side.commit[:12]}): {bench} {' '.join(extra)}")
    load = os.getloadavg()[0]
    # The benchmark and the workers it starts import this side's `app`, whatever the interpreter's
    # site-packages point to (an editable install of another checkout, say).
    env = {**os.environ, "PYTHONPATH": str(side.root)}
    done = subprocess.run(command, cwd=side.root, env=env, stdout=subprocess.PIPE, text=True, timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"{side.label}: {bench}.py exited {done.returncode}")
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    figures: dict[str, float] = {"compare.load_average_1m_before": round(load, 2)}
    for index, line in enumerate(lines):
        figures.update(flatten(line, f"{index}" if len(lines) > 1 else ""))
    side.runs.setdefault(bench, []).append(figures)
    side.raw.setdefault(bench, []).append(lines)
    return True


def fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def table(bench: str, base: Side, head: Side) -> str:
    base_runs, head_runs = base.runs.get(bench, []), head.runs.get(bench, [])
    common = [name for name in head_runs[0] if all(name in run for run in base_runs + head_runs)]
    # A figure with one value in every run is a setting or a target, not a measurement.
    names = [name for name in common if len({run[name] for run in base_runs + head_runs}) > 1]
    width = max(len(name) for name in names)
    lines = [f"== {bench}: base {base.commit[:12]}, head {head.commit}", ""]
    lines.append(f"{'figure':<{width}}  {'base runs':>26}  {'head runs':>26}  {'head/base':>9}")
    for name in names:
        olds = [run[name] for run in base_runs]
        news = [run[name] for run in head_runs]
        old, new = statistics.median(olds), statistics.median(news)
        ratio = f"{new / old:.3f}" if old else "-"
        lines.append(
            f"{name:<{width}}  {' / '.join(fmt(v) for v in olds):>26}  "
            f"{' / '.join(fmt(v) for v in news):>26}  {ratio:>9}"
        )
    constant = [name for name in common if name not in names]
    if constant:
        lines.append(f"(the same in every run, not shown: {', '.join(constant)})")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("base", help="the commit to compare against (e.g. f2603b3)")
    parser.add_argument("head", nargs="?", help="the other commit (default: this checkout as it is)")
    parser.add_argument("--bench", default="send", help=f"comma-separated, of {', '.join(BENCHMARKS)}")
    parser.add_argument("--pairs", type=int, default=2, help="runs of each side per benchmark")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE_URL, help="suffixed _base and _head")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/tidings-compare"))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for one benchmark run")
    parser.add_argument("--json", type=Path, help="write every run's raw JSON output here")
    for bench in BENCHMARKS:
        parser.add_argument(f"--{bench}", default="", metavar="ARGS", help=f"extra arguments for {bench}.py")
    args = parser.parse_args(argv)
    args.benches = [name.strip() for name in args.bench.split(",") if name.strip()]
    unknown = set(args.benches) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    base = unpack("base", args.base, args.scratch)
    head = unpack("head", args.head, args.scratch) if args.head else this_checkout()
    for bench in args.benches:
        extra = getattr(args, bench).split()
        if not (base.root / "tests" / "benchmarks" / f"{bench}.py").exists():
            print(f"== {bench}: base {base.commit[:12]} has no {bench}.py, skipped\n", flush=True)
            continue
        for pair in range(args.pairs):
            order = (base, head) if pair % 2 == 0 else (head, base)
            for side in order:
                run_one(side, bench, extra, args.database_url, args.timeout)
        print(table(bench, base, head) + "\n", flush=True)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"base": base.commit, "head": head.commit, "base_runs": base.raw, "head_runs": head.raw}
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
