"""Reading metrics in the Prometheus text format: a service's ``/metrics``, or a registry's."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["metric", "sample_sum", "samples"]


def samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """Every sample named ``name`` (``…_total`` for a counter) in ``text``, by its labels."""
    return {frozenset(sample.labels.items()): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == name}


def sample_sum(text: str, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` whose labels include ``labels`` (every sample of
    that name when none are given); 0 when there is none."""
    wanted = set(labels.items())
    return sum(value for sample_labels, value in samples(text, name).items()
               if wanted <= sample_labels)


def metric(url: str, name: str, **labels: str) -> float:
    """:func:`sample_sum` over the service's ``{url}/metrics``."""
    return sample_sum(httpx.get(f"{url}/metrics", timeout=10).text, name, **labels)
