"""The application environment's API, `/v1/application-environments`: its display, server limits, routing instances
and dynamic definitions, each held by the domain that owns it (operator, servers, routing, policy)."""
