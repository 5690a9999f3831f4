"""A smoke script's record: its KEY=VALUE figures (and a load's summary) in the project's schema.

`python scripts/smoke_record.py --timings FILE --out PATH --wall-seconds S --load-before L
[--load LOAD.json]`. Lines `config.KEY=VALUE` go to the record's config, every other line to
its metrics, each value read as a bool, int or float where it is one; with `--load`, the load
driver's summary (scripts/replicas_probe.py) goes to `metrics.load`. Used by
scripts/compose-smoke.sh and scripts/replicas-smoke.sh; imports the repo's benchmarks package.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def number(text: str) -> Any:
    """A figure's text as a bool, int or float where it reads as one."""
    if text in ("true", "false"):
        return text == "true"
    try:
        return float(text) if "." in text else int(text)
    except ValueError:
        return text


def figures(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The config and the metrics of a KEY=VALUE file (the last line for a key wins)."""
    pairs = dict(
        line.strip().split("=", 1) for line in path.read_text().splitlines() if "=" in line
    )
    config = {
        k.removeprefix("config."): number(v) for k, v in pairs.items() if k.startswith("config.")
    }
    metrics = {k: number(v) for k, v in pairs.items() if not k.startswith("config.")}
    return config, metrics


def main(argv: list[str]) -> int:
    """Write the record; print its metrics on stderr."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timings", type=Path, required=True, help="the KEY=VALUE figures")
    parser.add_argument("--out", type=Path, required=True, help="the record's path")
    parser.add_argument("--wall-seconds", type=float, required=True)
    parser.add_argument("--load-before", type=float, required=True, help="1-minute load average")
    parser.add_argument("--load", type=Path, help="the load driver's output, if there was one")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks import records

    started = records.Started(time.perf_counter() - args.wall_seconds, args.load_before)
    config, metrics = figures(args.timings)
    if args.load is not None:
        metrics = {"load": json.loads(args.load.read_text())["summary"], **metrics}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    body = records.save(args.out, config, metrics, started)
    print(json.dumps(body["metrics"], indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
