"""The zip of tierlog that sessions with a cluster master send their executors."""

from __future__ import annotations

import zipfile
from pathlib import Path

from tierlog.spark import shipping


def test_the_zip_holds_the_package_and_is_made_once(tmp_path: Path) -> None:
    made = shipping.package_zip(tmp_path)
    names = zipfile.ZipFile(made).namelist()
    assert "tierlog/__init__.py" in names and "tierlog/spark/datasource.py" in names
    assert "tierlog/spark/log4j2.properties" in names  # data files too
    assert not [n for n in names if "__pycache__" in n]
    made.write_bytes(b"not remade")  # a second call finds it by its content's digest
    assert shipping.package_zip(tmp_path) == made and made.read_bytes() == b"not remade"
    assert [p.name for p in tmp_path.iterdir()] == [made.name]  # no temporary left


def test_the_zip_goes_after_the_pyfiles_already_set(tmp_path: Path) -> None:
    made = str(shipping.package_zip(tmp_path))
    assert shipping.with_package({}, tmp_path) == {shipping.PYFILES_CONF: made}
    mine = {shipping.PYFILES_CONF: "/jobs/helpers.zip", "spark.app.name": "x"}
    assert shipping.with_package(mine, tmp_path) == {
        shipping.PYFILES_CONF: f"/jobs/helpers.zip,{made}",
        "spark.app.name": "x",
    }
