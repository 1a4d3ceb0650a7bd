"""What every plot of scripts/plot-bench.py shares: result files read into one table of runs,
and the drawing helpers (lines, grouped bars, size axes, legends, saving)."""
import collections
import re
import statistics
import textwrap

from bench_runs import family, runs_of

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

BASELINE = dict(color="0.45", linestyle="--")


class Results:
    def __init__(self, doc):
        self.rows = [(family(run), r) for run, results in runs_of(doc) for r in results]
        self.families = list(dict.fromkeys(f for f, _ in self.rows))
        # What the file calls its builds ({"before": "...", "after": "..."}), where it says.
        self.labels = doc.get("labels", {}) if isinstance(doc, dict) else {}

    def named(self, name):
        return [(f, r) for f, r in self.rows if r["name"] == name]

    def has(self, *names):
        return any(r["name"] in names for _, r in self.rows)

    def series(self, name, key, metric, where=None, fam=None):
        """{key value: [metric of each run]} for results `name` matching `where`."""
        out = collections.OrderedDict()
        for f, r in self.named(name):
            p = r.get("params", {})
            if (fam is not None and f != fam) or (where and any(p.get(k) != v for k, v in where.items())):
                continue
            if metric in r["metrics"]:
                out.setdefault(p.get(key, ""), []).append(r["metrics"][metric])
        return out

    def values(self, name, param):
        return list(dict.fromkeys(r.get("params", {}).get(param, "") for _, r in self.named(name)))


def device_name(label):
    """'#0 Portable Computing Language: pthread-...' -> '#0 PoCL'; 'rusticl: llvmpipe ... #2' -> '#2 rusticl'."""
    index = re.search(r"#\d+", label)
    kind = "PoCL" if "Portable Computing" in label or "pthread" in label else re.sub(r"#\d+", "", label).split(":")[0].strip()
    return (index.group(0) + " " if index else "") + kind[:16]


def size_label(b):
    b = int(float(b))
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def line(ax, data, label, style=None, scale=1.0):
    """One series: a point per run, a line through the medians; x numeric."""
    xs = sorted(data, key=float)
    if not xs:
        return
    style = style or {}
    med = [statistics.median(data[x]) * scale for x in xs]
    (l,) = ax.plot([float(x) for x in xs], med, marker="o", label=label, **style)
    for x in xs:
        if len(data[x]) > 1:
            ax.scatter([float(x)] * len(data[x]), [v * scale for v in data[x]], s=8, color=l.get_color(), alpha=0.5)


def bars(ax, groups, series, title_unit, log=False):
    """Grouped bars: groups = x labels; series = [(label, [value per group or None], style)]."""
    width = 0.8 / max(1, len(series))
    for i, (label, vals, style) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        points = [(x, v) for x, v in zip(xs, vals) if v]
        if not points:
            continue
        ax.bar([x for x, _ in points], [statistics.median(v) for _, v in points], width, label=label, **style)
        for x, v in points:
            if len(v) > 1:
                ax.scatter([x] * len(v), v, s=8, color="black", alpha=0.6, zorder=3)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel(title_unit)
    if log:
        ax.set_yscale("log")


def sizes_axis(ax, xlabel="message size"):
    xs = sorted({float(x) for l in ax.get_lines() for x in l.get_xdata()})
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([size_label(x) for x in xs], fontsize=8)
    ax.set_xlabel(xlabel)


def finish(fig, ax_list, path, title, legend_below=False):
    """legend_below: True, or how far below the axes (in axes heights, negative) the legend goes."""
    for ax in ax_list:
        handles = ax.get_legend_handles_labels()[0]
        if legend_below and handles:  # long labels: under the plot (and under its tick labels)
            below = -0.2 if legend_below is True else legend_below
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, below), ncol=1)
        elif len(handles) > 6:  # beside the plot, not over it
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        elif handles:
            ax.legend(fontsize=7)
        ax.grid(True, which="major", alpha=0.3)
    # Lines longer than the figure is wide (about 12 characters an inch at this size) wrap.
    width = int(fig.get_figwidth() * 12)
    fig.suptitle("\n".join(textwrap.fill(t, width) for t in title.split("\n")), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(path)
