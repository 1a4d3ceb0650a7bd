"""Result files of ringpipe-bench as runs: what the plots and the targets table both read."""
import re


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
