"""The archives operator side: the Athena SQL of a search, running it, the CLIs request."""
