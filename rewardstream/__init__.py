"""rewardstream's composition root: the ``rewardstream`` command (:mod:`rewardstream.cli`), the
one place that imports every package."""
