"""The release controller: canaries decided by a sequential A/B read from the reward stream."""
