"""``make test``'s spread over processes (tests/conftest.py): a module's tests share one
process under ``--dist loadgroup``, in a pytest run of its own."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]


@pytest.mark.timeout(180)
def test_a_modules_tests_run_in_one_process_under_loadgroup(tmp_path: Path) -> None:
    """Six tests of one module over three processes: one process runs them all. When the
    grouping is lost (pytest 9.2 with xdist 3.8 did so silently) they spread out, and a
    module's fixtures, brokers and Spark sessions are built in every process."""
    pids = tmp_path / "pids"
    pids.mkdir()
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    (tests / "test_grouped.py").write_text(
        textwrap.dedent(
            f"""
            import os
            import pytest

            @pytest.mark.parametrize("n", range(6))
            def test_records_its_process(n):
                open(os.path.join({str(pids)!r}, str(n)), "w").write(str(os.getpid()))
            """
        )
    )
    run = subprocess.run(
        [*PYTEST, "-n", "3", "--dist", "loadgroup", str(tests)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    seen = {p.read_text() for p in pids.iterdir()}
    assert len(list(pids.iterdir())) == 6
    assert len(seen) == 1, f"the module's tests ran in {len(seen)} processes"


@pytest.mark.timeout(180)
def test_the_spark_groups_are_run_first_then_larger_groups(tmp_path: Path) -> None:
    """xdist's own order (groups with more tests first) ran the Spark groups, which have few
    tests but run longest, last and side by side. The queue is now the three Spark groups,
    then the others with more tests first: one process runs them in that order."""
    ran = tmp_path / "ran"
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            import pytest
            from tests.conftest import pytest_collection_modifyitems  # noqa: F401
            from tests.conftest import pytest_configure as grouped_configure

            def pytest_configure(config):
                for name in ("fixed_ports", "notebooks"):
                    config.addinivalue_line("markers", f"{{name}}: a process group")
                grouped_configure(config)

            @pytest.fixture
            def spark():
                return None

            @pytest.fixture(autouse=True)
            def record(request):
                with open({str(ran)!r}, "a") as out:
                    out.write(request.node.name + "\\n")
            """
        )
    )
    bodies = {
        "test_a_small.py": "def test_small(): pass\n",
        "test_b_notebooks.py": "import pytest\npytestmark = pytest.mark.notebooks\n"
        "def test_nb(): pass\n",
        "test_c_fixed.py": "import pytest\n@pytest.mark.fixed_ports\ndef test_port(): pass\n",
        "test_d_large.py": "def test_one(): pass\ndef test_two(): pass\n",
        "test_e_spark.py": "def test_uses(spark): pass\n",
    }
    for name, body in bodies.items():
        (tests / name).write_text(body)
    run = subprocess.run(
        [*PYTEST, "-n", "1", "--dist", "loadgroup", str(tests)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    order = ran.read_text().split()
    assert order == ["test_uses", "test_port", "test_nb", "test_one", "test_two", "test_small"]
