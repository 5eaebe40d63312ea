"""Many replicas, one elected scheduler (seeds 003/004), and the advisories that announce what happens."""
