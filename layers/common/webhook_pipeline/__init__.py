"""Webhook pipeline: verified, deduplicated, ordered webhook ingestion on AWS.

The package is the shared code of the Lambda functions (deployed as the common layer):
domain modules (``signatures``, ``envelope``, ``sources``, ``ingest``, ``processing``, ``replay``)
know nothing of boto3 or redis; adapters (``gate``, ``queue``, ``payloads``, ``store``,
``secrets``) sit behind small Protocols and are wired in the function handlers.
"""

__version__ = "0.1.0"
