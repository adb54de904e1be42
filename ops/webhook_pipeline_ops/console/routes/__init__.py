"""The console's routes, one module per page: Starlette endpoints taking the request and reading
the backend and settings from ``request.app.state``
(:func:`webhook_pipeline_ops.console.app.create_app` lists them and fills the state).
"""
