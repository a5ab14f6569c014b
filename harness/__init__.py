"""The agent harness, client instrumentation SDK, simulated users, eval suite and the demo."""
