"""Redis queues: the key layout (one hash tag per application environment on a node) and one Lua script per
state transition of a work request."""
