"""Operator tooling of the webhook pipeline: the ``webhook-pipeline`` CLI, the local stack, the
sender simulator and sample events. Not deployed to Lambda."""
