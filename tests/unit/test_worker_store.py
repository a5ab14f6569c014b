"""The worker registers its state store even when the cluster node Quix reads from has not yet
learnt of the changelog topic Quix just created (KRaft nodes learn new topics asynchronously)."""

from __future__ import annotations

import pytest
from quixstreams.models.topics.exceptions import TopicNotFoundError

from infra.errors import BrokerError
from streams.worker import _register_store


class _DataFrame:
    """Quix's dataframe as the worker uses it: ``register_store`` fails ``misses`` times."""

    def __init__(self, misses: int) -> None:
        self.misses, self.calls = misses, 0

    def register_store(self) -> None:
        self.calls += 1
        if self.calls <= self.misses:
            raise TopicNotFoundError('Topic "changelog__x" not found on the broker')


def test_a_changelog_not_yet_seen_is_read_again_until_it_is() -> None:
    sdf = _DataFrame(misses=2)
    _register_store(sdf, timeout_s=10.0)
    assert sdf.calls == 3


def test_a_changelog_never_seen_fails_naming_the_topic_and_the_wait() -> None:
    sdf = _DataFrame(misses=1_000)
    with pytest.raises(BrokerError, match=r'"changelog__x" not found on the broker 1 s after'):
        _register_store(sdf, timeout_s=1.0)
    assert 2 <= sdf.calls <= 4
