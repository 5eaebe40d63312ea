"""The HTTP edge, shared by every router: guards on what comes in (body limits, NUL characters, the hot paths), the
Prometheus HTTP middleware, the notice that the process is stopping, and the routes of custom methods."""
