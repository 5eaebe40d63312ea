"""WLM: a goal-oriented workload manager offered as a REST service."""
