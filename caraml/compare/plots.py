"""The comparison's plots as PNG files: throughput per device and energy
efficiency per system, throughput over batch and devices, power timelines
and scaling efficiency. Estimated energy is hatched and labelled, published
reference figures are grey and labelled as such."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from caraml.compare.figures import energy_kind, ok_rows  # noqa: E402

DPI = 90


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _published(refs: pd.DataFrame, benchmark: str, figure: str) -> pd.DataFrame:
    """Published references of one per-device figure; a total on one device counts as per device."""
    if refs is None or refs.empty:
        return pd.DataFrame()
    pub = refs[(refs["origin"] == "published") & (refs["benchmark"] == benchmark)]
    if figure == "throughput_per_device":
        per_device = (pub["figure"] == "throughput") & (pd.to_numeric(pub["devices"]) == 1)
        return pub[(pub["figure"] == figure) | per_device]
    return pub[pub["figure"] == figure]


def bars(rows: pd.DataFrame, refs: pd.DataFrame, out: Path) -> list[Path]:
    """Per benchmark: throughput per device and work per Wh of each system's
    best configuration, beside the published figures."""
    paths = []
    best = ok_rows(rows)[ok_rows(rows)["best"]]
    for benchmark, group in best.groupby("benchmark", sort=False):
        unit = group["unit"].iloc[0]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
        for ax, figure, title in ((axes[0], "throughput_per_device", f"{unit}/s per device"),
                                  (axes[1], "work_per_wh", f"{unit}/Wh")):
            labels = [f"{r.system}\n{r.config}\nbatch {r.global_batch:g} x{r.devices:g}"
                      for r in group.itertuples()]
            values = list(group[figure])
            estimated = [figure == "work_per_wh" and energy_kind(s) == "estimated"
                         for s in group["energy_source"]]
            colours = ["tab:blue"] * len(values)
            for ref in _published(refs, benchmark, figure).itertuples():
                batch = "" if pd.isna(ref.global_batch) else f" batch {ref.global_batch:g}"
                labels.append(f"{ref.system}\n{ref.model}{batch}\n(published)")
                values.append(ref.value)
                estimated.append(False)
                colours.append("0.65")
            bars_ = ax.bar(range(len(values)), values, color=colours)
            for bar, est in zip(bars_, estimated):
                if est:
                    bar.set_hatch("//")
                    bar.set_facecolor("white")
                    bar.set_edgecolor("tab:orange")
            for bar, value, est in zip(bars_, values, estimated):
                text = f"{value:.3g}" + (" (estimated)" if est else "")
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
            ax.set_xticks(range(len(values)), labels, fontsize=7)
            ax.set_title(title + (" (hatched: estimated energy)" if any(estimated) else ""), fontsize=9)
            ax.set_yscale("log" if max(values) > 50 * max(min(values), 1e-12) else "linear")
        fig.suptitle(f"{benchmark}: best configuration per system", fontsize=10)
        paths.append(_save(fig, out / f"bars_{benchmark}.png"))
    return paths


def heatmaps(rows: pd.DataFrame, out: Path) -> list[Path]:
    """Total throughput over global batch size and device count, per system and configuration."""
    paths = []
    for (system, benchmark, config), group in ok_rows(rows).groupby(["system", "benchmark", "config"],
                                                                    sort=False):
        grid = group.pivot_table(index="devices", columns="global_batch", values="throughput", aggfunc="max")
        fig, ax = plt.subplots(figsize=(1.4 + 0.9 * grid.shape[1], 1.4 + 0.6 * grid.shape[0]))
        image = ax.imshow(grid.to_numpy(), cmap="viridis", aspect="auto", origin="lower")
        middle = (grid.min().min() + grid.max().max()) / 2
        for (i, j), value in pd.DataFrame(grid.to_numpy()).stack().items():
            ax.text(j, i, f"{value:.3g}", ha="center", va="center", fontsize=8,
                    color="k" if value > middle else "w")  # readable on viridis' light and dark ends
        ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns], fontsize=8)
        ax.set_yticks(range(grid.shape[0]), [f"{i:g}" for i in grid.index], fontsize=8)
        ax.set_xlabel("global batch size")
        ax.set_ylabel("devices")
        ax.set_title(f"{system} {config}: {group['unit'].iloc[0]}/s", fontsize=8)
        fig.colorbar(image, ax=ax)
        safe = "".join(c if c.isalnum() else "_" for c in f"{system}_{benchmark}_{config}")
        paths.append(_save(fig, out / f"heatmap_{safe}.png"))
    return paths


def power_timeline(samples: pd.DataFrame, out: Path) -> list[Path]:
    """Power per device over each job's time, from jpwr's flushed samples."""
    if samples.empty:
        return []
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for (label, channel), group in samples.groupby(["label", "channel"], sort=False):
        est = " (estimated)" if group["estimated"].any() else ""
        ax.plot(group["t"], group["power_w"], lw=1, label=f"{label} {channel}{est}")
    ax.set_xlabel("seconds since the job's first sample")
    ax.set_ylabel("power (W)")
    ax.legend(fontsize=7, loc="best")
    ax.set_title("power per device during training", fontsize=9)
    return [_save(fig, out / "power_timeline.png")]


def scaling(table: pd.DataFrame, out: Path) -> list[Path]:
    if table.empty:
        return []
    fig, ax = plt.subplots(figsize=(7, 3.6))
    for (system, config, series), group in table.groupby(["system", "config", "series"], sort=False):
        ax.plot(group["devices"], group["efficiency"], marker="o", label=f"{system} {config}: {series}")
    ax.axhline(1.0, color="0.5", lw=0.8)
    ax.set_xlabel("devices")
    ax.set_ylabel("efficiency")
    ax.legend(fontsize=7)
    ax.set_title("scaling efficiency against the smallest run", fontsize=9)
    return [_save(fig, out / "scaling.png")]
