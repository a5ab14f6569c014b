"""Event envelope, typed payloads, topics and schema versions: the contract between packages.

This package imports nothing else of rewardstream; every other package may import it.
"""
