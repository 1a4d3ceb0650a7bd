#!/usr/bin/python3
"""Where the open issues' benchmark targets stand, read from ringpipe-bench result files.

  scripts/bench-targets.py FILE.json ...        prints the table (Markdown) for these files
                                                (FILE.json:BUILD: only the runs of that build,
                                                "after" of a file of "before-N" and "after-N" runs)
  scripts/bench-targets.py --check DOC.md       fails if a table in DOC differs from its files
  scripts/bench-targets.py --write DOC.md       rewrites the tables in DOC from their files

A table in a document sits between `<!-- targets: FILE ... -->` and `<!-- /targets -->`; the
files are named from the repository root. Each file is one configuration (its "machine" entry
names it, else its file name); every run in it gives one value per target, and a row says the
range, the median and in how many runs the target was met, since throughput on a shared machine
moves from run to run. Where a target does not apply to a configuration, the row says why
instead of met or not.
"""
import pathlib
import re
import statistics
import sys

from bench_runs import family, read_result_file, runs_of

ROOT = pathlib.Path(__file__).resolve().parent.parent


def own_cores(params):
    """Whether a scaling run's devices computed on cores of their own: its "cores" entry, or in
    files from before there was one, what it said of the CPU devices ("own cores" in the oldest)."""
    if "cores" in params:
        return params["cores"] == "own"
    cpus = params.get("cpu_devices")
    return cpus is None or "of its own" in cpus or cpus == "own cores"


# (issue, what, result name, params it must have, metric, at least (True) or at most, threshold,
#  scale for printing, unit)
TARGETS = [
    (14, "one device, 16 B: ringpipe / hand-written", "versus", {"shape": "one_device_16B"}, "ratio", True, 0.9, 1, ""),
    (14, "one device, 4 KiB: ringpipe / hand-written", "versus", {"shape": "one_device_4KiB"}, "ratio", True, 0.9, 1, ""),
    (14, "two devices chained, 16 B: ringpipe / hand-written", "versus", {"shape": "two_devices_chained_16B"}, "ratio",
     True, 0.9, 1, ""),
    (14, "one device, 16 B, in place (windows): ringpipe / hand-written", "versus", {"shape": "one_device_16B"},
     "windows_ratio", True, 0.9, 1, ""),
    (14, "one device, 4 KiB, in place (windows): ringpipe / hand-written", "versus", {"shape": "one_device_4KiB"},
     "windows_ratio", True, 0.9, 1, ""),
    (14, "two devices chained, 16 B, in place (windows): ringpipe / hand-written", "versus",
     {"shape": "two_devices_chained_16B"}, "windows_ratio", True, 0.9, 1, ""),
    (14, "one message's round trip: hand-written / ringpipe", "versus", {"shape": "one_message_round_trip"}, "ratio",
     True, 50, 1, ""),
    (14, "`add_source`/`add_sink`, per message / inlet-outlet", "versus",
     {"shape": "source_sink_vs_inlet_outlet_16B"}, "ratio", True, 0.8, 1, ""),
    (14, "`add_source_batch`/`add_sink_batch` / inlet-outlet", "versus",
     {"shape": "source_sink_batches_vs_inlet_outlet_16B"}, "ratio", True, 0.8, 1, ""),
    (17, "`scaling`, 2 devices: efficiency", "scaling.parallel_for", {"devices": "2"}, "efficiency", True, 0.89, 1, ""),
    (17, "`scaling`, 3 devices: efficiency", "scaling.parallel_for", {"devices": "3"}, "efficiency", True, 0.89, 1, ""),
    (17, "`work_stealing`: static dealing / stealing", "work_stealing.farm", {}, "static_over_stealing", True, 1.3, 1,
     ""),
    (17, "`work_stealing`: stealing / ideal", "work_stealing.farm", {}, "stealing_over_ideal", False, 1.1, 1, ""),
    (17, "`replica_exchange`: an exchange / 100 sweeps (on the device)", "replica_exchange",
     {"exchange_on": "device"}, "exchange_over_sweeps", False, 0.01, 100, "%"),
]


# Files written before `versus` recorded the mode its round trip's kernel ran in, and that mode as
# their section of the performance journal (docs/performance/) gives it (the H100 through NVIDIA's OpenCL: batched only).
ROUND_TRIP_MODE_BEFORE_IT_WAS_RECORDED = {"nvidia-h100-2026-11-26": "batched",
                                          "nvidia-h100-2026-11-27-mirror-spans": "batched"}


def not_applying(name, params, stem):
    """Why a result's target does not apply to it, or None."""
    if name == "scaling.parallel_for" and not own_cores(params):
        return "the devices share the host's cores (the sum alone counts them once per device)"
    if params.get("shape") == "one_message_round_trip":
        mode = params.get("mode", ROUND_TRIP_MODE_BEFORE_IT_WAS_RECORDED.get(stem, "persistent"))
        if mode != "persistent":
            return f"the kernel ran {mode} (no resident mode): a launch per message, as hand-written"
    return None


def label_of(path, doc, build):
    """The file's configuration, and the build where a file compares several ("before", "after")."""
    label = doc.get("machine") if isinstance(doc, dict) and doc.get("machine") else pathlib.Path(path).stem
    return f"{label} [{build}]" if build else label


def number(v, scale, unit):
    v *= scale
    text = f"{v:.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 10 else f"{v:.2f}" if abs(v) >= 0.1 else f"{v:.3g}"
    return text + unit


def threshold_text(at_least, threshold, scale, unit):
    return ("≥ " if at_least else "≤ ") + f"{threshold * scale:g}" + unit


def rows_for(name):
    """A file's rows: FILE, or FILE.json:BUILD for one build of a file that compares several."""
    path, _, only = name.partition(".json:")
    path = path + ".json" if only else name
    file = ROOT / path if not pathlib.Path(path).is_absolute() else pathlib.Path(path)
    doc = read_result_file(file, "bench-targets")
    runs = runs_of(doc)
    builds = list(dict.fromkeys(family(run) for run, _ in runs))
    if only and only not in builds:
        sys.exit(f"bench-targets: {path} has no build '{only}' (it has: {', '.join(builds)})")
    builds = [only] if only else builds
    rows = []
    for build in builds:
        rows += rows_of_build(label_of(path, doc, f"{pathlib.Path(path).stem}: {build}" if only else
                                       build if len(builds) > 1 else ""),
                              [results for run, results in runs if family(run) == build], pathlib.Path(path).stem)
    if not rows:
        sys.exit(f"bench-targets: {name} holds no result that a target reads")
    return rows


CORES = "cores_round_trip_ns"


def far_apart(runs):
    """Whether a row ran with the process's cores far apart: its cache line's round trip between two
    cores (versus rows since 2026-11-30) over twice the nearest any row of these runs saw. A VM's
    vCPUs move near and far, and 16-byte streams run 2-4x slower far apart."""
    seen = [r["metrics"][CORES] for results in runs for r in results if r["metrics"].get(CORES, 0) > 0]
    nearest = min(seen, default=0)
    return lambda r: nearest > 0 and r["metrics"].get(CORES, 0) > 2 * nearest


def misses_far_text(misses, far):
    """What a verdict adds where rows say how far apart the cores were: how many misses ran far."""
    if not misses or not any(CORES in r["metrics"] for r in misses):
        return ""
    n = sum(1 for r in misses if far(r))
    ns = sorted(r["metrics"][CORES] for r in misses if far(r))
    where = f" ({ns[0]:.0f}-{ns[-1]:.0f} ns)" if len(ns) > 1 else f" ({ns[0]:.0f} ns)" if ns else ""
    return ("; every miss" if n == len(misses) else f"; {n} of the misses" if n else "; no miss") + \
        f" ran with the cores far apart{where}"


def rows_of_build(label, runs, stem):
    rows = []
    far = far_apart(runs)
    for issue, what, name, where, metric, at_least, threshold, scale, unit in TARGETS:
        values, misses, why = [], [], None
        for results in runs:
            for r in results:
                p = r.get("params", {})
                if r.get("name") != name or any(p.get(k) != v for k, v in where.items()) or metric not in r["metrics"]:
                    continue
                v = r["metrics"][metric]
                values.append(v)
                if not (v >= threshold if at_least else v <= threshold):
                    misses.append(r)
                why = why or not_applying(name, p, stem)
        if not values:
            continue
        met = len(values) - len(misses)
        span = number(min(values), scale, unit) if len(values) == 1 else \
            f"{number(min(values), scale, unit)}-{number(max(values), scale, unit)} " \
            f"({number(statistics.median(values), scale, unit)})"
        verdict = f"does not apply: {why}" if why else \
            ("every run" if met == len(values) else "no run" if met == 0 else f"{met} of {len(values)} runs") + \
            misses_far_text(misses, far)
        target = threshold_text(at_least, threshold, scale, unit)
        rows.append((issue, what, target, label, len(values), span, verdict))
    return rows


def table(paths):
    rows = [row for path in paths for row in rows_for(path)]
    rows.sort(key=lambda row: (row[0], [t[1] for t in TARGETS].index(row[1])))
    out = ["| issue | target | | configuration | runs | range (median) | met in |",
           "|---:|---|---|---|---:|---|---|"]
    out += [f"| {i} | {what} | {target} | {label} | {n} | {span} | {verdict} |"
            for i, what, target, label, n, span, verdict in rows]
    return "\n".join(out) + "\n"


BLOCK = re.compile(r"(<!-- targets: ([^>]*?) -->\n)(.*?)(<!-- /targets -->)", re.S)


def rewrite(doc_path, check):
    text = pathlib.Path(doc_path).read_text()
    blocks = list(BLOCK.finditer(text))
    if not blocks:
        sys.exit(f"bench-targets: {doc_path} has no <!-- targets: FILE ... --> block")
    fresh = BLOCK.sub(lambda m: m.group(1) + table(m.group(2).split()) + m.group(4), text)
    if check:
        if fresh != text:
            sys.exit(f"bench-targets: a targets table in {doc_path} differs from its result files; "
                     f"regenerate it with scripts/bench-targets.py --write {doc_path}")
        print(f"bench-targets: {len(blocks)} table(s) in {doc_path} match their result files")
    elif fresh != text:
        pathlib.Path(doc_path).write_text(fresh)


def main(argv):
    if argv in (["--help"], ["-h"]):
        sys.stdout.write(__doc__)
    elif len(argv) == 2 and argv[0] in ("--check", "--write"):
        rewrite(argv[1], argv[0] == "--check")
    elif argv and not any(a.startswith("-") for a in argv):
        sys.stdout.write(table(argv))
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
