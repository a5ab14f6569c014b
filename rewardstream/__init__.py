"""rewardstream's composition root: what brings every package together."""
