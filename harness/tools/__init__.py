"""The agent's tools, the sandbox they run in, and the strict tool-call parser."""
