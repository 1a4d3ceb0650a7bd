#!/usr/bin/python3
"""Plots of ringpipe-bench results (ringpipe-bench --json FILE) as PNG files.

  scripts/plot-bench.py [FILE.json ...] [--out DIR]

Without files: every result file in bench/, into docs/images/bench/ (what docs/performance.md
shows); scripts/plots.sh installs Debian's python3-matplotlib first. One PNG per file and topic
(FILE-topic.png). A file holds one run ({"results": [...]}) or several ({"runs": {name: ...}}):
every run is drawn as a point, the line or bar is the median of runs of one name ("base-3" and
"base-4" are one name), since throughput on a shared machine varies from run to run. ringpipe is
drawn in solid colours, baselines (hand-written OpenCL, raw MPI, std::barrier, memcpy) in grey or
dashed, and every axis says its unit.
"""
import argparse
import math
import pathlib
import statistics
import sys
import textwrap

try:
    import matplotlib  # noqa: F401
except ImportError:
    sys.exit("plot-bench: needs matplotlib: apt-get install python3-matplotlib (scripts/plots.sh installs it)")

from bench_runs import read_result_file
from bench_plot_cores import has_cores, plot_versus_cores
from bench_plot_common import BASELINE, Results, bars, device_name, finish, line, plt, size_label, sizes_axis
from bench_plot_rings import has_rings, plot_host_rings
from bench_plot_idle import plot_idle
from bench_plot_farm import farm_told_costs, farm_turns, plot_farm, plot_farm_items, plot_farm_told_costs, plot_farm_turns

def plot_host_to_kernel(res, path, title):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    devices = res.values("host_to_kernel", "device")
    for fam in res.families:
        tag = f" [{fam}]" if len(res.families) > 1 else ""
        for dev in devices:
            on = f" ({dev})" if len(devices) > 1 else ""
            for mode in res.values("host_to_kernel", "mode"):
                w = {"device": dev, "mode": mode}
                line(a, res.series("host_to_kernel", "msg_bytes", "msgs_per_s", w, fam), f"{mode}{on}{tag}")
                line(b, res.series("host_to_kernel", "msg_bytes", "rtt_p50_us", w, fam), f"{mode} p50{on}{tag}")
            base = {"device": dev}
            line(a, res.series("host_to_kernel.relaunch_baseline", "msg_bytes", "msgs_per_s", base, fam),
                 f"baseline: a launch per message{on}", BASELINE)
            line(b, res.series("host_to_kernel.relaunch_baseline", "msg_bytes", "rtt_p50_us", base, fam),
                 f"baseline: a launch per message, p50{on}", BASELINE)
    if len(devices) == 1:
        title += f"\nring kernels on {devices[0]}"
    line(a, res.series("spsc_baseline", "msg_bytes", "msgs_per_s"), "baseline: host SPSC ring", dict(color="0.7", linestyle=":"))
    for ax, unit in ((a, "messages per second"), (b, "round trip p50 (µs)")):
        ax.set_yscale("log")
        ax.set_ylabel(unit)
        sizes_axis(ax)
    a.set_title("host → kernel → host throughput", fontsize=9)
    b.set_title("one message's round trip", fontsize=9)
    finish(fig, (a, b), path, title)


def plot_links_between_kernels(res, path, title):
    links = res.has("kernel_to_kernel", "cross_device")
    latency = res.has("pipeline_latency", "asio_baseline")
    # Only the panels the file has results for (a file with one kind draws it alone, not an empty
    # panel beside it).
    fig, axes = plt.subplots(1, 2 if links and latency else 1, figsize=(11, 4) if links and latency else (6.5, 4))
    axes = list(axes) if links and latency else [axes]
    a = axes.pop(0) if links else None
    b = axes.pop(0) if latency else None
    for name in ("kernel_to_kernel", "cross_device") if links else ():
        for link in res.values(name, "link"):
            for fam in res.families:
                tag = f" [{fam}]" if len(res.families) > 1 else ""
                where = "one device" if name == "kernel_to_kernel" else "two devices"
                line(a, res.series(name, "msg_bytes", "msgs_per_s", {"link": link}, fam), f"{where}, {link}{tag}")
    if links:
        a.set_yscale("log")
        a.set_ylabel("messages per second")
        sizes_axis(a)
        a.set_title("kernel → kernel throughput", fontsize=9)
    if latency:
        plot_pipeline_latency(res, b)
    finish(fig, tuple(x for x in (a, b) if x is not None), path, title)


def plot_pipeline_latency(res, b):
    # One group per pipeline shape and family of runs (builds compared in one file).
    fams = res.families if len(res.families) > 1 else [None]
    cells = [(f, fam) for f in res.values("pipeline_latency", "fused") for fam in fams
             if res.series("pipeline_latency", "fused", "p50_us", {"fused": f}, fam).get(f)]
    groups = [("fused pipeline" if f in ("1", "true") else "pipeline") + (f"\n[{fam}]" if fam else "") for f, fam in cells]
    asio = any(res.series("asio_baseline", "msg_bytes", "p50_us").values())
    if asio:
        groups.append("baseline:\nAsio post chain")
    series = []
    for q, shade in (("p50_us", "C0"), ("p99_us", "C1"), ("p999_us", "C2")):
        vals = [res.series("pipeline_latency", "fused", q, {"fused": f}, fam).get(f) for f, fam in cells]
        if asio:
            vals.append(sum(res.series("asio_baseline", "msg_bytes", q).values(), []) or None)
        series.append((q.replace("_us", ""), vals, dict(color=shade)))
    bars(b, groups, series, "latency (µs)", log=True)
    if len(fams) > 1:
        b.tick_params(axis="x", labelsize=7)
    b.set_title("one message through a pipeline", fontsize=9)


def plot_versus(res, path, title):
    shapes = res.values("versus", "shape")
    # The legend of an A/B (a bar per build) under the plot: beside it, it took a third of the width
    # and the shape names ran into each other.
    several = len(res.families) > 1
    fig, ax = plt.subplots(figsize=(11, 4.9 + 0.3 * len(res.families) if several else 4.2))
    series = []
    for i, fam in enumerate(res.families):
        vals = [res.series("versus", "shape", "ratio", {"shape": s}, fam).get(s) for s in shapes]
        if any(vals):
            series.append((res.labels.get(fam, fam) or "ringpipe", vals, dict(color=f"C{i}")))
        # The stream shapes driven in place (ring windows) as well as through push_n/pop_n.
        in_place = [res.series("versus", "shape", "windows_ratio", {"shape": s}, fam).get(s) for s in shapes]
        if any(in_place):
            label = (res.labels.get(fam, fam) or "ringpipe") + ", in place (ring windows)"
            series.append((label, in_place, dict(color=f"C{i}", alpha=0.45, hatch="//")))
    # Wrapped, not slanted: slanted, the long shape names ran into each other.
    bars(ax, [textwrap.fill(s.replace("_", " "), 13) for s in shapes], series, "ringpipe ÷ baseline (× better when > 1)",
         log=True)
    ax.axhline(1.0, **BASELINE, label="even with the baseline")
    ax.axhline(0.9, color="C3", linestyle=":", label="target 0.9× (throughput; round trip: 50×)")
    finish(fig, (ax,), path, title + "\nbaseline: hand-written CLHPP (batched; for round trips, a launch per message); "
           "source/sink shapes against inlet/outlet\nsporadic round trips: one message after each 2 ms of quiet (polled: the application loops on try_pop)",
           legend_below=-0.36 if several else False)


def plot_remote(res, path, title):
    """ringpipe per family of runs (builds compared in one file), raw MPI over every run."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    fams = res.families if len(res.families) > 1 else [None]

    def both(fam, p50, p99):
        return [sum(res.series("remote.latency", "bytes", m, fam=fam).values(), []) or None for m in (p50, p99)]

    series = [(f"ringpipe: {fam}" if fam else "ringpipe", both(fam, "one_way_p50_us", "one_way_p99_us"),
               dict(color=f"C{i}")) for i, fam in enumerate(fams)]
    series.append(("baseline: raw MPI", both(None, "mpi_one_way_p50_us", "mpi_one_way_p99_us"), dict(color="0.6")))
    a.axhline(5.0, color="C3", linestyle=":", label="target: p50 ≤ 5 µs")
    bars(a, ["p50", "p99"], series, "one-way latency of an 8-byte message (µs)", log=True)
    a.set_title("latency between two ranks", fontsize=9)
    for i, fam in enumerate(fams):
        line(b, res.series("remote.stream", "bytes", "bytes_per_s", fam=fam),
             f"ringpipe remote link: {fam}" if fam else "ringpipe remote link", dict(color=f"C{i}"), scale=1e-9)
    for i, fam in enumerate(fams):  # files from 2026-11-26 on: the receiving rank's first to last message
        line(b, res.series("remote.stream", "bytes", "steady_bytes_per_s", fam=fam),
             f"steady: {fam}" if fam else "ringpipe, steady (receiver)", dict(color=f"C{i}", linestyle="--"),
             scale=1e-9)
    line(b, res.series("remote.stream", "bytes", "mpi_bytes_per_s"), "baseline: raw MPI, one buffer", BASELINE, scale=1e-9)
    line(b, res.series("remote.stream", "bytes", "mpi_steady_bytes_per_s"), "baseline: raw MPI, one buffer, steady",
         dict(color="0.3", linestyle="--"), scale=1e-9)
    line(b, res.series("remote.stream", "bytes", "mpi_ring_buffers_bytes_per_s"),
         "baseline: raw MPI, as many buffers as the ring's slots", dict(color="0.45", linestyle="--"),
         scale=1e-9)
    line(b, res.series("remote.stream", "bytes", "mpi_16_buffers_bytes_per_s"), "baseline: raw MPI, 16 buffers",
         dict(color="0.7", linestyle=":"), scale=1e-9)
    line(b, res.series("remote.stream", "bytes", "mpi_huge_pages_bytes_per_s"),  # files from 2026-11-27 on
         "baseline: raw MPI, one buffer on huge pages", dict(color="k", linestyle="-."), scale=1e-9)
    b.set_yscale("log")
    b.set_ylabel("GB/s")
    sizes_axis(b)
    b.set_title("a stream between two ranks", fontsize=9)
    finish(fig, (a, b), path, title)


def plot_links_matrix(res, path, title):
    sizes = sorted(res.values("links", "bytes"), key=float)
    ends = list(dict.fromkeys([r["params"]["from"] for _, r in res.named("links")] +
                              [r["params"]["to"] for _, r in res.named("links")]))
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.2 * len(sizes), 4))
    axes = axes if len(sizes) > 1 else [axes]
    for ax, size in zip(axes, sizes):
        grid = [[math.nan] * len(ends) for _ in ends]
        memcpy = []
        for _, r in res.named("links"):
            p = r["params"]
            if p["bytes"] == size:
                grid[ends.index(p["from"])][ends.index(p["to"])] = r["metrics"]["gb_per_s"]
                memcpy.append(r["metrics"].get("memcpy_gb_per_s", math.nan))
        im = ax.imshow(grid, cmap="viridis")
        top = max(v for row in grid for v in row if not math.isnan(v))
        for i in range(len(ends)):
            for j in range(len(ends)):
                if not math.isnan(grid[i][j]):
                    ax.text(j, i, f"{grid[i][j]:.2g}", ha="center", va="center", fontsize=7,
                            color="black" if grid[i][j] > 0.6 * top else "white")
        short = [device_name(e) for e in ends]
        ax.set_xticks(range(len(ends)))
        ax.set_xticklabels(short, rotation=30, ha="right", fontsize=7)
        ax.set_yticks(range(len(ends)))
        ax.set_yticklabels(short, fontsize=7)
        ax.set_xlabel("to")
        ax.set_ylabel("from")
        ax.set_title(f"{size_label(size)}: GB/s (host memcpy {statistics.median(memcpy):.2g} GB/s)", fontsize=8)
        fig.colorbar(im, ax=ax, shrink=0.7, label="GB/s")
    finish(fig, (), path, title)


def plot_collectives(res, path, title):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for ax, name, metric, what, base, base_what in (
            (a, "collectives.all_reduce_latency", "p50_us", "all-reduce p50", "host_gather_p50_us",
             "baseline: gather to the host and back"),
            (b, "collectives.all_reduce_bandwidth", "busbw_gb_per_s", "bus bandwidth", "memcpy_gb_per_s",
             "baseline: host memcpy")):
        for i, pair in enumerate(res.values(name, "pair")):
            w = {"pair": pair}
            line(ax, res.series(name, "bytes", metric, w), f"{what}, {pair}", dict(color=f"C{i}"))
            line(ax, res.series(name, "bytes", base, w), f"{base_what}, {pair}",
                 dict(color=f"C{i}", linestyle="--", alpha=0.5))
    a.set_ylabel("latency p50 (µs)")
    b.set_ylabel("GB/s")
    for ax in (a, b):
        ax.set_yscale("log")
        sizes_axis(ax, "array size")
    a.set_title("all-reduce latency", fontsize=9)
    b.set_title("all-reduce bandwidth", fontsize=9)
    finish(fig, (a, b), path, title)


def plot_barrier(res, path, title):
    keys = list(dict.fromkeys((r["params"].get("kind", ""), r["params"].get("participants", ""),
                               r["params"].get("device", "")) for _, r in res.named("barrier")))
    # Long kinds ("kernels+host through host") wrap: neighbouring labels would overlap.
    groups = [f"{k.replace(' through', chr(10) + 'through')} ×{n}" + (f"\n{d[:14]}" if d else "") for k, n, d in keys]

    def col(metric):
        out = []
        for k, n, d in keys:
            v = [r["metrics"][metric] for _, r in res.named("barrier")
                 if (r["params"].get("kind", ""), r["params"].get("participants", ""), r["params"].get("device", "")) ==
                 (k, n, d) and metric in r["metrics"]]
            out.append(v or None)
        return out
    fig, ax = plt.subplots(figsize=(11, 4))
    bars(ax, groups, [("ringpipe p50", col("p50_us"), dict(color="C0")), ("ringpipe p99", col("p99_us"), dict(color="C1")),
                      ("ringpipe mean (kernels: no clock on the device)", col("mean_us"), dict(color="C2")),
                      ("baseline: std::barrier p50", col("std_barrier_p50_us"), dict(color="0.55")),
                      ("baseline: a spinning barrier p50", col("spin_barrier_p50_us"), dict(color="0.8")),
                      ("baseline: a clFinish round trip", col("clfinish_mean_us"), dict(color="0.3"))],
         "time per phase (µs)", log=True)
    ax.set_ylim(top=ax.get_ylim()[1] * 30)  # room for the legend above the bars
    finish(fig, (ax,), path, title + "\nkind × participants")


def plot_scaling(res, path, title):
    # One colour per build where a file compares builds (its families), named by its labels; their
    # legends go under the plots (taller figure), where the long labels cover no bar.
    fams = res.families if len(res.families) > 1 else [None]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4 + 1.2 * (len(fams) > 1)))
    tag = lambda fam: f" [{res.labels.get(fam, fam)}]" if fam else ""
    devs = res.values("scaling.parallel_for", "devices")
    col = lambda fam, metric: [res.series("scaling.parallel_for", "devices", metric, None, fam).get(d) for d in devs]
    series = [("items per second" + tag(fam), col(fam, "items_per_s"), dict(color=f"C{i}")) for i, fam in enumerate(fams)]
    series += [("baseline: the sum of each device alone" + tag(fam), col(fam, "sum_alone_items_per_s"),
                dict(color=f"{0.45 + 0.2 * i:.2f}")) for i, fam in enumerate(fams)]
    bars(a, devs, series, "items per second")
    a.set_xlabel("devices")
    efficiency = "\n".join(
        (res.labels.get(fam, fam) + ": " if fam else "") + ", ".join(
            f"{statistics.median(v):.2f}" for v in res.series("scaling.parallel_for", "devices", "efficiency", None,
                                                              fam).values()) for fam in fams)
    a.set_title("parallel_for over devices, efficiency by devices\n" + efficiency, fontsize=9)
    farm = res.named("work_stealing.farm")
    if farm:
        # A group per build (every run's makespan a dot, the bar their median).
        runs = lambda fam, metric: [r["metrics"][metric] for f, r in farm if fam is None or f == fam] or None
        groups = [res.labels.get(fam, fam) if fam else "" for fam in fams]
        bars(b, groups, [("static dealing", [runs(f, "static_s") for f in fams], dict(color="C1")),
                         ("as it comes: least loaded, stealing", [runs(f, "stealing_s") for f in fams],
                          dict(color="C0")),
                         ("baseline: ideal (each device alone)", [runs(f, "ideal_s") for f in fams],
                          dict(color="0.6"))], "seconds (less is better)")
        b.set_ylim(0, b.get_ylim()[1] * 1.3)  # room for the legend above the bars
        b.set_title("a farm of two replicas, uneven items", fontsize=9)
    elif res.has("scaling.resident"):
        devs = res.values("scaling.resident", "devices")
        rcol = lambda fam, metric: [res.series("scaling.resident", "devices", metric, None, fam).get(d) for d in devs]
        series = [("split arrays: the data stays on the devices" + tag(fam), rcol(fam, "split_arrays_items_per_s"),
                   dict(color=f"C{i}")) for i, fam in enumerate(fams)]
        series += [("baseline: host arrays, copied in and out each run" + tag(fam), rcol(fam, "host_arrays_items_per_s"),
                    dict(color=f"{0.45 + 0.2 * i:.2f}")) for i, fam in enumerate(fams)]
        bars(b, devs, series, "items per second")
        b.set_xlabel("devices")
        if len(fams) == 1:
            b.set_ylim(0, b.get_ylim()[1] * 1.3)  # room for the legend above the bars
        b.set_title("a light kernel run after run (block partition)", fontsize=9)
    finish(fig, (a, b), path, title, legend_below=len(fams) > 1)


def plot_replica_exchange(res, path, title):
    fig, ax = plt.subplots(figsize=(8, 4))
    rows = res.named("replica_exchange")
    where = list(dict.fromkeys(r["params"].get("exchange_on", "") for _, r in rows))
    sweeps = rows[0][1]["params"].get("sweeps_per_exchange", "")

    def col(metric):
        return [[r["metrics"][metric] for _, r in rows if r["params"].get("exchange_on", "") == w and
                 r["metrics"].get(metric, 0) > 0] or None for w in where]
    bars(ax, [f"exchange on the {w}\n({100 * statistics.median(r['metrics']['exchange_over_sweeps'] for _, r in rows if r['params'].get('exchange_on', '') == w):.2f}% of the sweeps)"
              for w in where],
         [(f"baseline: {sweeps} sweeps of every replica", col("sweeps_us"), dict(color="0.6")),
          ("an exchange alone (phases with no sweeps)", col("exchange_us"), dict(color="C0")),
          ("what it adds to a phase of sweeps", col("added_to_phase_us"), dict(color="C1"))],
         "µs per phase", log=True)
    ax.set_ylim(top=ax.get_ylim()[1] * 30)  # room for the legend above the bars
    ax.set_title("resident replicas, exchanges at barrier points (target: < 1% of the sweeps' time)", fontsize=9)
    finish(fig, (ax,), path, title)


def plot_staging(res, path, title):
    fig, ax = plt.subplots(figsize=(11, 4))
    for fam in res.families:  # builds compared in one file: a line each
        tag = f" [{fam}]" if len(res.families) > 1 else ""
        for lanes in res.values("host_to_kernel", "staging_lanes"):
            for mode in res.values("host_to_kernel", "mode"):
                line(ax, res.series("host_to_kernel", "msg_bytes", "msgs_per_s", {"staging_lanes": lanes, "mode": mode},
                                    fam), f"{mode}, {lanes} staging lane(s){tag}")
    ax.set_yscale("log")
    ax.set_ylabel("messages per second")
    ax.set_title("host → kernel → host on a device without shared memory", fontsize=9)
    sizes_axis(ax)
    finish(fig, (ax,), path, title)


def plot_round_group(res, path, title):
    """A round's group of 64 (the default before) against the device's default, alternated in one run."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    group = res.values("round_group", "default_group")[0]
    for ax, metric, unit in ((a, "msgs_per_s", "messages per second"), (b, "rtt_p50_us", "round trip p50 (µs)")):
        line(ax, res.series("round_group", "msg_bytes", "group64_" + metric), "baseline: groups of 64", BASELINE)
        line(ax, res.series("round_group", "msg_bytes", "default_" + metric), f"groups of {group}, claims up to 64")
        ax.set_yscale("log")
        ax.set_ylabel(unit)
        sizes_axis(ax)
    a.set_title("host → persistent kernel → host throughput", fontsize=9)
    b.set_title("one message's round trip", fontsize=9)
    finish(fig, (a, b), path, title + "\neach point: the median of 8 alternated runs of each group in one process")


TOPICS = [  # (file suffix, needs any of these results, plot)
    ("throughput", ("host_to_kernel",), lambda r: r.has("host_to_kernel") and not r.values("host_to_kernel", "staging_lanes")[0],
     plot_host_to_kernel),
    ("staging", ("host_to_kernel",), lambda r: bool(r.values("host_to_kernel", "staging_lanes")[0]), plot_staging),
    ("kernel-links", ("kernel_to_kernel", "cross_device", "pipeline_latency"), None, plot_links_between_kernels),
    ("versus", ("versus",), None, plot_versus),
    ("versus-cores", ("versus",), has_cores, plot_versus_cores),
    ("remote", ("remote.latency", "remote.stream"), None, plot_remote),
    ("links", ("links",), None, plot_links_matrix),
    ("collectives", ("collectives.all_reduce_latency",), None, plot_collectives),
    ("barrier", ("barrier",), None, plot_barrier),
    ("scaling", ("scaling.parallel_for",), None, plot_scaling),
    ("farm", ("work_stealing.every_device",), None, plot_farm),
    ("farm-costs", ("work_stealing.farm",), farm_told_costs, plot_farm_told_costs),
    ("farm-items", ("farm_items",), None, plot_farm_items),
    ("farm-turns", ("work_stealing.farm",), farm_turns, plot_farm_turns),
    ("replica-exchange", ("replica_exchange",), None, plot_replica_exchange),
    ("round-group", ("round_group",), None, plot_round_group),
    ("host-rings", ("spsc_baseline",), has_rings, plot_host_rings),
    ("idle", ("idle",), None, plot_idle),
]


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", type=pathlib.Path)
    ap.add_argument("--out", type=pathlib.Path)
    args = ap.parse_args()
    files = args.files or sorted((root / "bench").glob("*.json"))
    out = args.out or (root / "docs" / "images" / "bench" if not args.files else pathlib.Path("."))
    out.mkdir(parents=True, exist_ok=True)
    made = 0
    for f in files:
        doc = read_result_file(f, "plot-bench")
        res = Results(doc)
        machine = doc.get("machine", "") if isinstance(doc, dict) else ""
        for suffix, names, when, plot in TOPICS:
            if res.has(*names) and (when is None or when(res)):
                plot(res, out / f"{f.stem}-{suffix}.png", f"{f.name}" + (f" ({machine})" if machine else ""))
                made += 1
    if made == 0:
        sys.exit("plot-bench: nothing to plot in " + ", ".join(str(f) for f in files))


if __name__ == "__main__":
    main()
