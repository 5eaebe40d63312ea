"""Routing work across nodes: the cluster workload algorithm (pure), node attributes and link states."""
