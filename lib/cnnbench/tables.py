"""Presentation tables built from a run's tidy results (and, where labelled, the seeds' published numbers)."""

from __future__ import annotations

import pandas as pd

from cnnbench import published


def complexity_vs_seed(complexity: pd.DataFrame) -> pd.DataFrame:
    """Seed 000's Table 1 beside our counts, with a computed note on each disagreement."""
    ref = complexity[complexity.role.str.startswith("reference")].set_index("model")
    train = complexity[complexity.role.str.contains("training")].set_index("model")
    rows = []
    for _, seed in published.COMPLEXITY_000.iterrows():
        if seed.model not in ref.index:
            continue
        ours, notes = ref.loc[seed.model], []
        rel = seed.flops_g / ours.gmacs_fwd - 1
        if abs(rel) < 0.01:
            notes.append(
                f"000's 'FLOPs' are MACs (ours {ours.gmacs_fwd:.3f} G): true FLOPs are 2x, {ours.gflops_fwd:.3f} G"
            )
        else:
            notes.append(
                f"000's figure is {rel:+.1%} off our {ours.gmacs_fwd:.3f} GMACs (torchvision publishes "
                f"{ours.published_gmacs:.3f}); fvcore, which adds batch norm and pooling, gives {ours.fvcore_gmacs:.3f}"
            )
        row = {
            "model": seed.model,
            "params_m (published by 000)": seed.params_m,
            "params_m (ours, 1000 classes)": ours.params / 1e6,
            "FLOPs/image G (published by 000)": seed.flops_g,
            "gmacs_fwd @224 (ours)": ours.gmacs_fwd,
            "gflops_fwd @224 (ours)": ours.gflops_fwd,
        }
        if seed.model in train.index:
            t = train.loc[seed.model]
            row[f"gflops_train @{t.image_size} (ours)"] = t.gflops_train
            notes.append(
                f"trained at {t.image_size}x{t.image_size}: forward {t.gmacs_fwd:.3f} GMACs, "
                f"{ours.gmacs_fwd / t.gmacs_fwd:.1f}x fewer than at 224; a training step is {t.gflops_train:.3f} GFLOPs "
                f"({t.train_fwd_ratio:.2f}x forward)"
            )
        row["note"] = "; ".join(notes)
        rows.append(row)
    return pd.DataFrame(rows)


def fvcore_difference(complexity: pd.DataFrame) -> pd.DataFrame:
    """Our MACs beside fvcore's, with the ops fvcore counts that we (and torchvision) do not."""
    df = complexity[["model", "image_size", "gmacs_fwd", "fvcore_gmacs", "fvcore_extra_ops"]].copy()
    df["fvcore_minus_ours_pct"] = 100 * (df.fvcore_gmacs / df.gmacs_fwd - 1)
    return df
