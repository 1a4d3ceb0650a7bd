"""versus rows against how far apart the process's cores were as each ran, for plot-bench.py."""

from matplotlib.colors import to_rgba

from bench_plot_common import BASELINE, finish, plt

CORES = "cores_round_trip_ns"
STALL_NS = 2000  # near cores measure 100-200 ns here, far ones 450-900
# The throughput shapes (their ratio to the hand-written program or to inlet/outlet) and a marker each.
SHAPES = [("one_device_16B", "o"), ("one_device_4KiB", "s"), ("two_devices_chained_16B", "^"),
          ("source_sink_vs_inlet_outlet_16B", "D"), ("source_sink_batches_vs_inlet_outlet_16B", "v")]


def has_cores(res):
    return any(CORES in r["metrics"] for _, r in res.named("versus"))


def plot_versus_cores(res, path, title):
    """A point per row and run: its ratio against the cache line's round trip between two cores as
    the row ran (near and far placements of a VM's vCPUs)."""
    # A file of several builds (an A/B): the first build's points hollow, the last's filled, any
    # between half filled, and the legend, which then names the builds, under the plot.
    families = [f for f in res.families if any(g == f and CORES in r["metrics"] for g, r in res.named("versus"))]
    fill = {f: 0.0 if k == 0 else 1.0 if k == len(families) - 1 else 0.35 for k, f in enumerate(families)}
    # A row that ran while the VM stalled (its cores microseconds apart) is drawn at the right edge,
    # so that it does not squeeze every other row into the left margin.
    edge = STALL_NS
    stalled = sum(1 for _, r in res.named("versus") if r["metrics"].get(CORES, 0) > edge)
    fig, ax = plt.subplots(figsize=(8, 6.2) if len(families) > 1 else (8, 4.4))
    for i, (shape, marker) in enumerate(SHAPES):
        for fam in families:
            rows = [r["metrics"] for f, r in res.named("versus")
                    if f == fam and r.get("params", {}).get("shape") == shape and CORES in r["metrics"]
                    and "ratio" in r["metrics"]]
            if not rows:
                continue
            last = fam == families[-1]
            ax.scatter([min(m[CORES], edge) for m in rows], [m["ratio"] for m in rows], marker=marker, alpha=0.75,
                       facecolors=to_rgba(f"C{i}", fill[fam]), edgecolors=f"C{i}",
                       label=shape.replace("_", " ") if last else None)
    if len(families) > 1:
        for fam in families:
            ax.scatter([], [], marker="o", facecolors=to_rgba("grey", fill[fam]), edgecolors="grey",
                       label=res.labels.get(fam, fam))
    ax.axhline(1.0, **BASELINE, label="even with the baseline")
    ax.axhline(0.9, color="C3", linestyle=":", label="target 0.9× (source/sink forms: 0.8×)")
    ax.axhline(0.8, color="C3", linestyle=":", alpha=0.5)
    ax.set_xlim(left=0, right=edge * 1.03 if stalled else None)
    ax.set_xlabel("a cache line's round trip between two cores as the row ran (ns)")
    ax.set_ylabel("ringpipe ÷ baseline (× better when > 1)")
    shown = {shape for shape, _ in SHAPES}
    without = sum(1 for _, r in res.named("versus")
                  if r.get("params", {}).get("shape") in shown and CORES not in r["metrics"])
    finish(fig, (ax,), path, title + "\nbaseline: hand-written CLHPP; source/sink shapes against inlet/outlet. "
           "Each point: one row of one run" +
           (f"; {stalled} rows that ran with the cores over {edge:,} ns apart (the VM stalled) at the right edge"
            if stalled else "") +
           (f" ({without} rows of builds that did not measure the cores are left out)" if without else ""),
           legend_below=len(families) > 1)
