"""docs/apis.md is written from the API tables and up to date."""

from __future__ import annotations

from tierlog.protocol.api_catalog import KAFKA_APIS
from tierlog.protocol.versions import ADVERTISED, ApiKey
from tierlog.tools import api_table


def test_docs_page_is_up_to_date() -> None:
    assert api_table.main(["--check"]) == 0, "run python -m tierlog.tools.api_table"


def test_page_lists_every_key_with_its_versions() -> None:
    page = api_table.render()
    for api in KAFKA_APIS:
        assert f"| {api.key} | {api.name} | {api.status.value} |" in page
    produce = ADVERTISED[ApiKey.PRODUCE]
    assert f"| 0 | Produce | implemented | {produce[0]}-{produce[1]} / 3-13 |" in page
