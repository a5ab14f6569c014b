"""Stream processors: the per-trajectory reward join, its archive of ``events.raw`` and replay."""
