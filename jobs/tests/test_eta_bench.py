"""The ETA accuracy benchmark's code path on a tiny input (the benchmark itself is
``make bench``: bench/eta_accuracy.py)."""

from __future__ import annotations

import math
from pathlib import Path

from core.tests.scripts import load_script

BENCH = Path(__file__).resolve().parents[2] / "bench" / "eta_accuracy.py"


def load():
    return load_script(BENCH, "eta_accuracy")


def test_the_eta_benchmark_replays_a_small_workload_and_scores_engine_and_baseline():
    bench = load()
    workload = bench.make_workload(2, 200, 7)
    assert len(workload) > 10
    # the engine never sees the run times it is scored against
    assert any(a.estimate is None for a in workload)
    assert all(a.estimate != a.run for a in workload)
    result = bench.replay(workload, 7)
    assert result.unstarted == 0 and result.calls > len(workload)
    figures = bench.figures(result)
    for name in ("engine, every pass", "naive FIFO, every pass"):
        f = figures[name]
        assert f["n"] > 0 and 0 <= f["coverage"] <= 1 and not math.isnan(f["mae"])
        # the goal's figure: the median error over the median actual wait
        assert f["relative"] == f["mae"] / f["wait"] and f["wait"] > 0
    assert any(p.p90 > p.p50 for p in result.engine)   # p90 is a real upper quantile
