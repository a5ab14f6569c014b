"""The OpenAI-compatible model gateway: arms, checkpoint routing, ``completion.served`` events."""
