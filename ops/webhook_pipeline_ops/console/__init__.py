"""``webhook-pipeline console``: a web console for deliveries, the DLQ and replay, on this machine.

It serves server-rendered pages on 127.0.0.1 with the operator's own AWS credentials (or the local
stack), reading through the same functions as the CLI: the delivery store's lookups
(:mod:`webhook_pipeline_ops.delivery_records`), the time index
(:mod:`webhook_pipeline_ops.time_index`), the DLQ peek (:mod:`webhook_pipeline_ops.dlq_peek`),
the replay (:func:`webhook_pipeline_ops.direct_replay.run_direct`, i.e.
:func:`webhook_pipeline.replay.run.replay`) and the queue status
(:mod:`webhook_pipeline_ops.queue_status`).

The CLI verb is :mod:`webhook_pipeline_ops.commands.console`. Modules: :mod:`.app` (routes and
pages), :mod:`.backend` (data), :mod:`.jobs` (replays in the background), :mod:`.health` (metrics,
alarms), :mod:`.security` (Host check, same-origin and token checks, response headers),
:mod:`.bodies` (safe body display), :mod:`.server` (the uvicorn server, started and stopped
cleanly).
"""

from __future__ import annotations

#: Default port of the console (the local stack's gateway is on 3000).
DEFAULT_PORT = 8380
