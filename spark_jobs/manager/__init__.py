"""The workload manager's rules as pure functions, shared by the service (app/) and the what-if job: how a service
class did against its goal (`goals`), how many servers each class needs and which server serves which (`servers`),
and the order in which a select takes work (`select_order`), over the parts of a policy they read (`policy`:
goals, server limits). Like the records' contract beside it, it imports neither the web app nor PySpark, so the
job ships without the service."""
