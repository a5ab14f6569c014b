"""Network services (FastAPI): ingest API, model gateway, monitoring console."""
