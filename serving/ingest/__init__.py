"""The ingest HTTP API: ``POST /v1/events`` validates each event, appends it to ``events.raw``.

Pure parts (body decoding, per-event verdicts, caps, rate limiting, the dedupe window, API keys)
live in their own modules with no I/O; ``app`` and ``kafka_io`` are the thin edges around them.
"""
