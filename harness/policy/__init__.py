"""The tiny policy: a tokenizer and a few-million-parameter causal LM built from a config."""
