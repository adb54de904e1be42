"""What the deployment consumes (:class:`Usage`), the traffic (:class:`Scenario`) and the month's
counts every service model reads (:class:`Traffic`)."""

from __future__ import annotations

from dataclasses import dataclass

#: Default time a processor invocation waits on DynamoDB, ms (not measurable on an emulator:
#: ``--dynamodb-ms``). Single-digit milliseconds for a put, roughly twice for a transaction.
DYNAMODB_MS = 15.0


@dataclass(frozen=True)
class Usage:
    """What one delivery and one invocation consume, and the deployment's settings.

    Durations are billed milliseconds per invocation; sizes are bytes.
    """

    ingest_ms_accepted: float
    ingest_ms_duplicate: float
    ingest_log_bytes_accepted: float  # the function's own lines (log + EMF) per invocation
    ingest_log_bytes_duplicate: float
    processor_ms_fixed: float  # CPU per invocation, whatever the batch (rounding included)
    processor_ms_per_record: float  # CPU per record
    processor_log_bytes_fixed: float
    processor_log_bytes_per_record: float
    envelope_bytes: float
    delivery_item_bytes: float
    resource_item_bytes: float
    unordered_delivery_item_bytes: float
    redis_bytes_per_claim: float
    emf_metrics: int  # distinct metric name + dimensions combinations
    dynamodb_ms: float = DYNAMODB_MS  # DynamoDB wait per processor invocation (records concurrent)
    # from template.yaml
    ingest_memory_mb: int = 512
    processor_memory_mb: int = 512
    architecture: str = "arm64"
    batch_size: int = 10
    batching_window_s: float = 1.0
    dedup_ttl_s: float = 259_200
    delivery_retention_days: float = 30
    payload_expiration_days: float = 21
    log_retention_days: float = 30
    interface_endpoints: int = 2
    availability_zones: int = 2
    alarm_metrics: int = 0
    dashboards: int = 1
    tracing: bool = True
    sources: int = 7
    # what the design does per delivery
    redis_commands_accepted: int = 2  # SET NX EX GET, EVALSHA (confirm)
    redis_commands_duplicate: int = 1
    ecpu_per_command: float = 1.0  # simple commands on values under 1 KB
    gate_writes_accepted: int = 0  # DynamoDB writes of the gate itself (variant no-redis)
    gate_writes_duplicate: int = 0
    gate_item_bytes: float = 0.0
    in_vpc: bool = True
    uses_redis: bool = True
    platform_log_bytes: float = 0.0  # START / END / REPORT lines per invocation
    xray_log_bytes: float = 0.0  # the REPORT's XRAY line of a sampled invocation
    api_access_log_bytes: float = 0.0
    ingest_info_line_bytes: float = 0.0  # the per-delivery INFO line (part of the log bytes)
    processor_info_line_bytes: float = 0.0  # per record (part of the per-record log bytes)
    # the archive (template.yaml; sizes measured by bench/bench_archive_size.py at 2 KB bodies)
    archiver_memory_mb: int = 1024
    archiver_batch_size: int = 1000
    archiver_batching_window_s: float = 60.0
    archive_retention_days: float = 90
    archive_bytes_per_record: float = 0.0  # gzip bytes stored per delivery; 0: not measured
    archive_message_bytes: float = 0.0  # one archive message (the record's JSON line)
    archive_encode_ms_per_record: float = 0.0  # CPU of encode_object per record


@dataclass(frozen=True)
class Scenario:
    """The traffic: requests a month and their mix.

    Attributes
    ----------
    per_month : float
        Webhook requests reaching the API in a month (duplicates included).
    duplicate_share : float
        Share of requests the gate answers as duplicates (sender retries), 0-1.
    ordered_share : float
        Share of new deliveries from sources with a resource key and sequence (the two-item
        transaction); the others are one conditional put.
    large_body_share : float
        Share of new deliveries whose body goes to S3 (over the inline limit, 150 kB).
    large_body_bytes : float
        Mean size of those bodies, bytes.
    warm_containers : float
        Ingest execution environments alive on average (each reads each secret every 300 s).
    xray_reservoir_per_s, xray_rate : float
        The X-Ray sampling rule: the first request each second, then this share of the rest.
    esm_pollers : int
        Long-polling receives the event source mapping keeps open on an idle queue.
    log_compression : float
        Archived over ingested log bytes (CloudWatch bills stored bytes compressed).
    secrets_max_age_s : float
        How long a container caches a secret (``SECRETS_MAX_AGE_SECONDS``).
    """

    per_month: float
    duplicate_share: float = 0.0
    ordered_share: float = 1.0
    large_body_share: float = 0.0
    large_body_bytes: float = 300_000
    warm_containers: float = 2
    xray_reservoir_per_s: float = 1.0
    xray_rate: float = 0.05
    esm_pollers: int = 5
    log_compression: float = 0.15
    secrets_max_age_s: float = 300


@dataclass(frozen=True)
class Traffic:
    """A month's requests as the services see them (counts a month; :func:`.estimate.traffic`).

    Attributes
    ----------
    scenario : Scenario
        The traffic these counts come from (its mix and settings).
    requests : float
        Webhook requests reaching the API (duplicates included).
    duplicates, new : float
        Requests the gate answers as duplicates; the others (new deliveries).
    ordered, unordered : float
        New deliveries written with the two-item transaction; with one conditional put.
    large : float
        New deliveries whose body goes to S3.
    invocations : float
        Processor invocations (batches).
    traced : float
        Invocations of both functions X-Ray records (0 without tracing).
    """

    scenario: Scenario
    requests: float
    duplicates: float
    new: float
    ordered: float
    unordered: float
    large: float
    invocations: float
    traced: float
