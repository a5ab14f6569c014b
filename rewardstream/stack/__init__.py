"""The platform on one machine: ``rewardstream up``, ``status`` and ``down``."""
