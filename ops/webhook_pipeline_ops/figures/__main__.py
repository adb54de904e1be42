"""``python -m webhook_pipeline_ops.figures [--check]``."""

from webhook_pipeline_ops.figures import main

raise SystemExit(main())
