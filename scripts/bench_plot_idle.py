"""What a started pipeline costs while nothing comes (topic idle), for plot-bench.py: the process's
CPU time and context switches over a quiet second per shape, each build in its colour, on log
axes (the builds differ a hundredfold); the process with nothing started is the baseline."""

import textwrap

from bench_plot_common import bars, finish, plt

METRICS = [("cpu_percent_of_a_core", "CPU time (% of one core)"), ("switches_per_s", "context switches per second")]


def plot_idle(res, path, title):
    shapes = res.values("idle", "shape")
    names = [textwrap.fill(s, 11) for s in shapes]
    lines = max((n.count("\n") + 1 for n in names), default=1)
    fig, axes = plt.subplots(1, 2, figsize=(max(12, 1.5 * len(shapes)), 5))
    for ax, (metric, unit) in zip(axes, METRICS):
        series = []
        for i, fam in enumerate(res.families):
            data = res.series("idle", "shape", metric, fam=fam)
            series.append((res.labels.get(fam, fam), [data.get(s) for s in shapes], dict(color=f"C{i}")))
        bars(ax, names, series, unit, log=True)
        ax.set_title(unit + " over a quiet second", fontsize=9)
    finish(fig, axes, path, title + "\neach bar: the median of a build's runs, each dot a run",
           legend_below=-0.08 - 0.055 * lines)
