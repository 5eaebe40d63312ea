"""Redis plumbing that knows no domain: topology and connections, the pipelined connection, scripts by
specification, durability, pub/sub, and the embedded server."""
