"""A built-in torch inference engine speaking vLLM's OpenAI-compatible protocol on CPU machines."""
