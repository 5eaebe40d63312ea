"""Many replicas, one elected scheduler (after TIBCO Rendezvous distributed queues: docs/sources.md), and the
background duties it runs (`duties/`)."""
