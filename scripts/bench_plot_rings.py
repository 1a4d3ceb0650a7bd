"""Two host threads over a host ring (spsc_baseline), for plot-bench.py: messages a second in runs
and one at a time, and the round trip of one message, against how far apart the process's cores
were as each run went (a VM's vCPUs near or far), a build's points in one colour."""

from bench_plot_common import finish, plt

CORES = "cores_round_trip_ns"
FORMS = [("msgs_per_s", "runs of 64 (push_n / pop_n)", "s"), ("per_message_msgs_per_s", "a message at a time (push / pop)", "o")]


def has_rings(res):
    return any(CORES in r["metrics"] for _, r in res.named("spsc_baseline"))


def plot_host_rings(res, path, title):
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.4))
    for i, fam in enumerate(res.families):
        rows = [r["metrics"] for f, r in res.named("spsc_baseline") if f == fam and CORES in r["metrics"]]
        if not rows:
            continue
        build = res.labels.get(fam, fam)
        for metric, form, marker in FORMS:
            got = [m for m in rows if metric in m]
            a.scatter([m[CORES] for m in got], [m[metric] for m in got], marker=marker, color=f"C{i}", alpha=0.75,
                      label=f"{form}: {build}")
        b.scatter([m[CORES] for m in rows], [m["rtt_p50_us"] for m in rows], color=f"C{i}", alpha=0.75, label=build)
    a.set_yscale("log")
    a.set_ylabel("messages per second (16 B)")
    a.set_title("one producer thread, one consumer thread, a 1,024-slot ring", fontsize=9)
    b.set_ylabel("round trip p50 (µs)")
    b.set_ylim(bottom=0)
    b.set_title("one message's round trip through two 1-slot rings", fontsize=9)
    for ax in (a, b):
        ax.set_xlim(left=0)
        ax.set_xlabel("a cache line's round trip between two cores (ns)")
    finish(fig, (a, b), path, title + "\neach point: one run", legend_below=True)
