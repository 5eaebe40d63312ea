"""Many replicas, one elected scheduler (seeds 003/004), and the background duties it runs (`duties/`)."""
