"""The streams benchmark's figures: the steady window leaves out the warm-up prefix and the end,
CPU per event is CPU over the window's events, a group's windows add up, the ratios are the
floor's (and aiokafka's) CPU per event over the join's, and the summary spans every run."""

from __future__ import annotations

import json

import pytest

from bench.streams import _steady_log
from bench.streams_figures import (
    Sample,
    Samples,
    run_figures,
    steady_figures,
    steady_window,
    summary,
)


def _samples(*rows: tuple[int, float, float]) -> list[Sample]:
    return [Sample(*row) for row in rows]


def test_the_window_starts_past_the_warmup_and_ends_before_the_last_event() -> None:
    samples = _samples((0, 0.0, 0.0), (4096, 1.0, 0.5), (8192, 2.0, 1.0), (12288, 3.0, 1.5),
                       (12500, 9.0, 1.6))  # the last: after the log's end (a final checkpoint)
    first, last = steady_window(samples, warmup_events=1000, total=12500)
    assert (first.events, last.events) == (4096, 12288)


def test_a_window_without_two_samples_is_refused() -> None:
    with pytest.raises(ValueError, match="no steady window"):
        steady_window(_samples((0, 0.0, 0.0), (10_000, 1.0, 1.0)), 1000, 10_000)


def test_cpu_per_event_is_the_window_cpu_over_its_events() -> None:
    window = (Sample(1000, 10.0, 2.0), Sample(11_000, 12.0, 3.0))
    figures = steady_figures([window])
    assert figures == {"events": 10_000, "wall_s": 2.0, "cpu_s": 1.0,
                       "cpu_us_per_event": 100.0, "events_per_s": 5000}


def test_a_groups_windows_add_events_and_cpu_over_the_span_of_all() -> None:
    one = (Sample(100, 10.0, 1.0), Sample(5100, 14.0, 2.0))
    two = (Sample(100, 11.0, 1.0), Sample(3100, 16.0, 2.5))
    figures = steady_figures([one, two])
    assert figures["events"] == 8000 and figures["cpu_s"] == 2.5
    assert figures["wall_s"] == 6.0 and figures["events_per_s"] == round(8000 / 6)
    assert figures["cpu_us_per_event"] == pytest.approx(312.5)


def _run(join_us: float, floor_us: float, load: float) -> dict[str, object]:
    contenders = {"join": {"cpu_us_per_event": join_us, "events_per_s": 10_000},
                  "floor": {"cpu_us_per_event": floor_us, "events_per_s": 150_000},
                  "aiokafka": {"cpu_us_per_event": 4.0, "events_per_s": 200_000},
                  "quix_bare": {"cpu_us_per_event": 10.0, "events_per_s": 90_000}}
    return {"contenders": contenders, "ratios": run_figures(contenders), "load_avg_1m": load}


def test_the_ratios_are_each_reference_over_the_join() -> None:
    ratios = _run(100.0, 6.0, 1.0)["ratios"]
    assert ratios == {"floor_to_join_cpu": 0.06, "aiokafka_to_join_cpu": 0.04,
                      "quix_bare_to_join_cpu": 0.1, "join_to_aiokafka_rate": 0.05}


def test_the_summary_spans_every_figure_over_the_runs_and_is_json() -> None:
    spans = summary([_run(100.0, 6.0, 2.0), _run(120.0, 6.0, 4.0), _run(80.0, 8.0, 3.0)])
    assert spans["runs"] == 3
    assert spans["join"]["cpu_us_per_event"] == {"min": 80.0, "max": 120.0}
    assert spans["floor"]["events_per_s"] == {"min": 150_000, "max": 150_000}
    assert spans["floor_to_join_cpu"] == {"min": 0.05, "max": 0.1}
    assert spans["load_avg_1m"] == {"min": 2.0, "max": 4.0}
    assert json.loads(json.dumps(spans)) == spans


def test_samples_count_this_process_cpu() -> None:
    samples = Samples()
    samples.take(0)
    sum(range(200_000))
    samples.take(1)
    assert [s.events for s in samples.taken] == [0, 1]
    assert samples.taken[1].cpu_s >= samples.taken[0].cpu_s


def test_the_log_is_cut_at_the_events_asked_for_with_fresh_trajectories() -> None:
    log = _steady_log(3000)
    assert len(log) == 3000
    assert len({key for key, _ in log}) > 3000 // 20  # ~11 events a trajectory
