"""The command line every implementation script shares: `python bench/<impl>.py DATA_DIR`
runs it on a folder written by bench/generate.py and prints its result as one JSON line."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path


def main(run: Callable[[Path], dict], doc: str | None) -> None:
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("data", type=Path, help="a folder written by bench/generate.py")
    json.dump(run(parser.parse_args().data), sys.stdout)
    print()
