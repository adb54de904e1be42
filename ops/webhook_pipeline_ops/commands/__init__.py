"""The CLI's commands: one module per verb, each with register(subparsers)."""
