"""The operator's view of application environments, as on z/OS (pure: no I/O).

commands: `VARY WLM,APPLENV=name,QUIESCE|RESUME|REFRESH` and `DISPLAY WLM,APPLENV=name|*` as typed at a console, and
the structured request body that says the same without the syntax.
states: the state of an application environment, what each command and each internal event does to it, what each
state means for work and servers, and the unexpected-termination count that stops an application environment.
"""
