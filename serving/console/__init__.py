"""The monitoring console: a web page and JSON API for alerts, metrics and checkpoints."""
