"""Integration tests reuse the remote tier's moto fixtures (one S3 server per session)."""

from tests.remote.conftest import s3_bucket, s3_server  # noqa: F401
