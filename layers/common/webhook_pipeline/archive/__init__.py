"""The archive: every accepted delivery's exact bytes and verdict, kept in S3 (invariant I10)."""
