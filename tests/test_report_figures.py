"""The report's small figure rules: a heatmap's colour scale resolves the range where
most cells lie, and cells above it are marked; a synthetic data set's reading note names its
generator, not LibSVM data."""

from __future__ import annotations

import numpy as np
import pandas as pd


def _cells(values: list[float]) -> pd.DataFrame:
    steps = [0.1, 0.03, 0.01, 0.003, 0.001]
    rows = []
    for i, v in enumerate(values):
        rows.append(
            {
                "algorithm": "fedht",
                "stepsize": steps[i % len(steps)],
                "local_steps": 3 + 2 * (i // len(steps)),
                "best_final": v,
                "valid_configs": 1,
                "cell": f"{v:.3g}",
            }
        )
    return pd.DataFrame(rows)


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].texts]


def test_a_few_outliers_do_not_flatten_the_heatmap_colours():
    """Logistic cells between 0.40 and 0.97 and two blown-up ones (40, 66): the colours span
    the best cell to five times it, the outliers take the top colour and are marked."""
    from fedsparse.families.hard_thresholding.figures import CLIPPED, heatmap_figure

    values = [0.40, 0.45, 0.52, 0.61, 0.7, 0.78, 0.85, 0.9, 0.97, 40.0, 66.0, 0.5]
    fig = heatmap_figure(_cells(values), "sim-logistic")
    norm = fig.axes[0].images[0].norm
    assert norm.vmin == 0.40 and norm.vmax == 2.0  # not 66: 0.40-0.97 spans 55 % of it
    assert (np.log(0.97) - np.log(0.4)) / (np.log(norm.vmax) - np.log(norm.vmin)) > 0.5
    marked = [t for t in _texts(fig) if t.endswith(CLIPPED)]
    assert sorted(marked) == [f"40{CLIPPED}", f"66{CLIPPED}"]
    assert CLIPPED in fig._suptitle.get_text()


def test_a_heatmap_without_outliers_is_not_clipped():
    from fedsparse.families.hard_thresholding.figures import CLIPPED, heatmap_figure

    values = [14.3, 20.0, 30.0, 40.8, 52.7, 70.8]  # Simulation I: within a factor 5
    fig = heatmap_figure(_cells(values), "sim-linear")
    norm = fig.axes[0].images[0].norm
    assert (norm.vmin, norm.vmax) == (14.3, 70.8)
    assert not any(t.endswith(CLIPPED) for t in _texts(fig))
    assert CLIPPED not in fig._suptitle.get_text()


def test_a_synthetic_data_sets_reading_note_names_its_generator():
    from fedsparse.families.hard_thresholding.report import AS_DISTRIBUTED, READINGS

    assert all("LibSVM" not in r.description for r in READINGS)
    assert "LibSVM" in AS_DISTRIBUTED
