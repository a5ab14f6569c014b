"""The trainer: reward-batch consumer, policy-gradient update, checkpoints, gate and registry."""
