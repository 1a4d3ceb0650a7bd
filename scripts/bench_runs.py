"""Result files of ringpipe-bench as runs: what the plots and the targets table both read."""
import json
import pathlib
import re
import sys


def read_result_file(path, tool):
    """The parsed JSON of a result file; a file that is missing or not JSON ends `tool` with why."""
    file = pathlib.Path(path)
    if not file.is_file():
        sys.exit(f"{tool}: no result file {path}")
    try:
        return json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        sys.exit(f"{tool}: {path} is not a result file (ringpipe-bench --json FILE writes one): {e}")


def runs_of(doc):
    """[(run name, [result, ...])] for the shapes ringpipe-bench and the bench/ files use."""
    if isinstance(doc, list):
        return [("", doc)]
    if "results" in doc:
        return [("", doc["results"])]
    out = []
    for name, run in doc.get("runs", {}).items():
        out.append((name, run.get("results", []) if isinstance(run, dict) else run))
    return out


def family(run):
    """A run's name without its number: "base-3" and "base-4" are runs of "base"."""
    return re.sub(r"[-_ ]?\d+$", "", run)
