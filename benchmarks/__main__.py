"""`python -m benchmarks [--quick] [--only NAME ...]`: run, print the table, write the report."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import NAMES, Settings, run
from .report import existing_analysis, load_average, markdown, text_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, 1-2 repetitions")
    ap.add_argument(
        "--only",
        action="append",
        choices=NAMES,
        metavar="NAME",
        help=f"run only this workload (repeatable): {', '.join(NAMES)}",
    )
    ap.add_argument("--reps", type=int, help="steady-state samples per variant (default 21)")
    ap.add_argument(
        "--out",
        type=Path,
        help=f"write the markdown report here (default: {DOC.relative_to(DOC.parents[1])} "
        "on a full run; nothing with --quick or --only)",
    )
    args = ap.parse_args(argv)
    settings = Settings(reps=2, first_reps=1, sample_s=0.0) if args.quick else Settings()
    if args.reps:
        settings.reps = args.reps
    titles: list[str] = []
    load = load_average()
    t0 = time.perf_counter()
    rows = run(
        args.only,
        quick=args.quick,
        settings=settings,
        titles=titles,
        log=lambda s: print(s, file=sys.stderr, flush=True),
        strict=False,
    )
    elapsed = time.perf_counter() - t0
    print(text_table(rows))
    out = args.out or (DOC if not (args.quick or args.only) else None)
    if out is not None:
        command = "python -m benchmarks " + " ".join(argv if argv is not None else sys.argv[1:])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            markdown(rows, command.strip(), titles, elapsed, existing_analysis(out), load)
        )
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
