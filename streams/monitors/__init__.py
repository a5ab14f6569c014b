"""Monitors: windowed metrics, detectors with stated statistics, and the alert lifecycle."""
