"""Execute lessons in place so they are stored with outputs: `python -m graphcourse.authoring.execute notebooks/*.ipynb`.

Each notebook runs top to bottom in a fresh kernel, in its own folder, with nbclient. A
notebook that fails is left untouched on disk (nothing lost) and the error is reported.
Cells tagged ``strip-output`` are run but stored without their outputs: they describe the
machine that runs them (lesson 00), so a learner must see their own machine's answer, never
the one of the machine the course was built on.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from tqdm import tqdm


STRIP_TAG = "strip-output"
"""Cell tag: run the cell, store it without outputs (its answer belongs to whoever runs it)."""


def strip_tagged_outputs(nb: "nbformat.NotebookNode") -> int:
    """Clear the outputs and execution count of every code cell tagged STRIP_TAG; returns how many."""
    n = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and STRIP_TAG in cell.metadata.get("tags", []):
            cell.outputs, cell.execution_count = [], None
            n += 1
    return n


def execute_notebook(path: Path, timeout_s: int = 600, kernel_name: str = "python3") -> float:
    """Run one notebook top to bottom and write it back with its outputs; returns the seconds it took."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=timeout_s, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    elapsed = time.perf_counter() - start
    strip_tagged_outputs(nb)
    nbformat.write(nb, path)
    return elapsed


def main(argv: list[str] | None = None) -> int:
    """Command line: execute each notebook given, report time per notebook, exit 1 if any failed."""
    parser = argparse.ArgumentParser(prog="python -m graphcourse.authoring.execute", description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="notebooks to execute in place")
    parser.add_argument("--timeout", type=int, default=600, help="seconds allowed per cell (default 600)")
    args = parser.parse_args(argv)
    missing = [p for p in args.notebooks if not p.is_file()]
    if missing:
        print(f"error: no such notebook: {', '.join(map(str, missing))}", file=sys.stderr)
        return 2
    failed = 0
    for path in tqdm(args.notebooks, desc="executing", unit="notebook"):
        try:
            seconds = execute_notebook(path, args.timeout)
            tqdm.write(f"ok    {path} ({seconds:.1f} s)")
        except CellExecutionError as exc:
            failed += 1
            tqdm.write(f"FAIL  {path}: left unchanged on disk\n{str(exc)[-2000:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
