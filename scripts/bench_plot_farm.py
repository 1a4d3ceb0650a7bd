"""Farm makespans for plot-bench.py: ways of dealing, and a farm told each item's cost."""

from bench_plot_common import bars, finish, plt


def plot_farm(res, path, title):
    """Farm makespans per way of dealing (less is better), a group per build, a point per run."""
    every = res.has("work_stealing.every_device")
    fig, axes = plt.subplots(1, 2 if every else 1, figsize=(11, 4) if every else (6.5, 4))
    a, b = (axes if every else (axes, None))

    def col(name, metric, fam):
        v = [r["metrics"][metric] for f, r in res.named(name) if f == fam and metric in r["metrics"]]
        return v or None

    fams = res.families
    names = res.labels
    bars(a, [names.get(f, f) for f in fams], [("static: in turn, left where dealt", [col("work_stealing.farm", "static_s", f) for f in fams],
                    dict(color="0.6")),
                   ("in turn, stealing", [col("work_stealing.farm", "in_turn_stealing_s", f) or
                                          (col("work_stealing.farm", "stealing_s", f) if not
                                           col("work_stealing.farm", "least_loaded_s", f) else None) for f in fams],
                    dict(color="C1")),
                   ("least loaded, left where dealt", [col("work_stealing.farm", "least_loaded_s", f) for f in fams],
                    dict(color="C2")),
                   ("least loaded, stealing", [col("work_stealing.farm", "stealing_s", f)
                                               if col("work_stealing.farm", "least_loaded_s", f) else None
                                               for f in fams], dict(color="C0")),
                   ("least loaded by each item's cost, stealing", [col("work_stealing.farm", "by_cost_s", f) for f in fams],
                    dict(color="C4")),
                   ("baseline: ideal (work / summed speeds)", [col("work_stealing.farm", "ideal_s", f) for f in fams],
                    dict(color="0.3"))], "seconds (less is better)")
    a.set_ylim(0, a.get_ylim()[1] * 1.5)  # room for the legend above the bars
    a.set_title("a farm on the first two devices, uneven items", fontsize=9)
    if every:
        fam = [f for f in fams if col("work_stealing.every_device", "static_s", f)]
        devs = res.values("work_stealing.every_device", "devices")[0]
        bars(b, [names.get(f, f) for f in fam], [("static: in turn, left where dealt", [col("work_stealing.every_device", "static_s", f) for f in fam],
                       dict(color="0.6")),
                      ("in turn, stealing", [col("work_stealing.every_device", "in_turn_stealing_s", f) for f in fam],
                       dict(color="C1")),
                      ("least loaded, stealing",
                       [col("work_stealing.every_device", "least_loaded_stealing_s", f) for f in fam], dict(color="C0"))],
             "seconds (less is better)")
        b.set_ylim(0, b.get_ylim()[1] * 1.4)
        b.set_title(f"the farm on all {devs} devices (unequal: PoCL x2 + rusticl)", fontsize=9)
    finish(fig, [x for x in (a, b) if x is not None], path, title)


def farm_told_costs(res):
    """Results that measured the farm told costs both fed in order of cost and as dealt."""
    return any("by_cost_fed_as_dealt_s" in r["metrics"] for _, r in res.named("work_stealing.farm"))


def plot_farm_told_costs(res, path, title):
    """The farm told each item's cost, fed in order of cost and as dealt, against its ideal."""
    fig, ax = plt.subplots(figsize=(7, 4))

    def col(metric, fam):
        return [r["metrics"][metric] for f, r in res.named("work_stealing.farm") if f == fam and metric in r["metrics"]] or None

    fams = res.families
    bars(ax, [res.labels.get(f, f) for f in fams],
         [("as it comes: least loaded, stealing", [col("stealing_s", f) for f in fams], dict(color="C0")),
          ("baseline: its ideal (each device alone)", [col("ideal_s", f) for f in fams], dict(color="0.6")),
          # Builds without the as-dealt row fed every farm as dealt (ordering by cost came later).
          ("told costs, fed as dealt", [col("by_cost_fed_as_dealt_s", f) or col("by_cost_s", f) for f in fams],
           dict(color="C1")),
          ("told costs, fed in order of cost",
           [col("by_cost_s", f) if col("by_cost_fed_as_dealt_s", f) else None for f in fams], dict(color="C4")),
          ("baseline: its ideal (each device alone, told costs)", [col("ideal_by_cost_s", f) for f in fams],
           dict(color="0.3"))], "seconds (less is better)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.5)  # room for the legend above the bars
    ax.set_title("a farm on two devices, uneven items (one in ten 20x the cost)", fontsize=9)
    finish(fig, [ax], path, title)


def plot_farm_items(res, path, title):
    """A farm of cheap items (ordered and not) against the same stream through one kernel."""
    fig, ax = plt.subplots(figsize=(7, 4))

    def col(metric, fam):
        return [r["metrics"][metric] for f, r in res.named("farm_items") if f == fam and metric in r["metrics"]] or None

    fams = [f for f in res.families if col("one_kernel_items_per_s", f)]
    bars(ax, [res.labels.get(f, f) for f in fams],
         [("baseline: one kernel on one device", [col("one_kernel_items_per_s", f) for f in fams], dict(color="0.6")),
          ("farm on two devices, ordered", [col("farm_ordered_items_per_s", f) for f in fams], dict(color="C0")),
          ("farm on two devices, unordered", [col("farm_unordered_items_per_s", f) for f in fams], dict(color="C1"))],
         "items per second (more is better)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)  # room for the legend above the bars
    ax.set_title("cheap items (10 mixes each): a farm against one kernel", fontsize=9)
    finish(fig, [ax], path, title)


def farm_turns(res):
    """Results that ran the farm over a stream whose costly items fall on both replicas' turns."""
    return any("stealing_both_turns_s" in r["metrics"] for _, r in res.named("work_stealing.farm"))


def plot_farm_turns(res, path, title):
    """The farm and dealing in turn (both stealing) over two streams that differ only in where the
    costly items fall, against the ideal: a group per configuration (family), a point per run."""
    fig, ax = plt.subplots(figsize=(8, 4))

    def col(metric, fam):
        return [r["metrics"][metric] for f, r in res.named("work_stealing.farm") if f == fam and metric in r["metrics"]] or None

    fams = res.families
    bars(ax, [res.labels.get(f, f) for f in fams],
         [("costly items on one replica's turns: least loaded, stealing (the farm)", [col("stealing_s", f) for f in fams],
           dict(color="C0")),
          ("same stream: in turn, stealing", [col("in_turn_stealing_s", f) for f in fams], dict(color="C1")),
          ("same stream: baseline, its ideal (each device alone)", [col("ideal_s", f) for f in fams], dict(color="0.6")),
          ("costly items on both replicas' turns: least loaded, stealing (the farm)",
           [col("stealing_both_turns_s", f) for f in fams], dict(color="C2")),
          ("same stream: in turn, stealing", [col("in_turn_stealing_both_turns_s", f) for f in fams], dict(color="C3")),
          ("same stream: baseline, its ideal (each device alone)", [col("ideal_both_turns_s", f) for f in fams],
           dict(color="0.3"))],
         "seconds (less is better)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.6)  # room for the legend above the bars
    ax.set_title("a farm of two replicas, one item in ten 20x the cost", fontsize=9)
    finish(fig, [ax], path, title)
