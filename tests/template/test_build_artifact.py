"""What `sam build` produces: CPython 3.13 bytecode for every module, for both architectures.

Lambda's code filesystem is read-only, so a module shipped without its ``.pyc`` is compiled again
at every cold start. ``packaging/lambda.mk`` (``BuildMethod: makefile``) compiles the layer and the
functions; these tests build the real template twice, as a developer does, into private
directories (the repository's ``.aws-sam`` is left alone):

- ``sam build`` (the arm64 default) and
- ``sam build --config-env local`` (x86_64, samconfig.toml's local environment),

and check in each artifact that every ``.py`` has ``__pycache__/<name>.cpython-313.pyc`` with
CPython 3.13's magic number, the unchecked-hash flags (PEP 552: never validated against a
timestamp that Lambda does not keep) and the SipHash of the very source file it sits next to;
that the compiled extension modules are for the build's architecture; and, for the host's own
architecture, that the interpreter really loads the shipped ``.pyc`` files.

``sam build`` needs python3.13 on PATH and PyPI (pip downloads the layer's wheels).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.template

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
RESOURCES = ("CommonLayer", "IngestFunction", "ProcessorFunction", "ReplayFunction")
# CPython 3.13's bytecode magic number (importlib.util.MAGIC_NUMBER on 3.13: 3571, then \r\n).
MAGIC_313 = (3571).to_bytes(2, "little") + b"\r\n"
UNCHECKED_HASH_FLAGS = 0b01  # PEP 552: bit 0 hash-based, bit 1 (check_source) clear
ELF_MACHINE = {"arm64": 183, "x86_64": 62}  # EM_AARCH64, EM_X86_64


def _sam() -> str:
    binary = VENV_BIN / "sam"
    return str(binary) if binary.exists() else "sam"


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Both builds, run side by side: {architecture: build directory}."""
    env = {**os.environ, "SAM_CLI_TELEMETRY": "0", "AWS_DEFAULT_REGION": "us-east-1"}
    commands = {"arm64": [], "x86_64": ["--config-env", "local"]}
    running = {}
    for arch, extra in commands.items():
        out = tmp_path_factory.mktemp(f"sam-build-{arch}")
        log = (out / "sam.log").open("wb")
        process = subprocess.Popen(
            [
                _sam(), "build", *extra,
                "--build-dir", str(out / "build"), "--cache-dir", str(out / "cache"),
            ],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        running[arch] = (process, out, log)
    try:
        for arch, (process, out, log) in running.items():
            code = process.wait(timeout=900)
            log.close()
            assert code == 0, f"sam build ({arch}) failed:\n{(out / 'sam.log').read_text()[-4000:]}"
        yield {arch: out / "build" for arch, (_, out, _) in running.items()}
    finally:
        for process, _, log in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
            log.close()


def _sources(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_expected_magic_number_is_this_interpreters_on_313() -> None:
    if sys.version_info[:2] == (3, 13):
        assert importlib.util.MAGIC_NUMBER == MAGIC_313


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_every_module_ships_its_unchecked_hash_pyc_for_cpython_313(
    builds: dict[str, Path], arch: str
) -> None:
    # Given the artifact of one architecture's build
    build = builds[arch]
    counted = 0
    missing: list[str] = []
    wrong: list[str] = []
    for resource in RESOURCES:
        sources = _sources(build / resource)
        assert sources, f"{resource}: no Python sources in the build"
        for source in sources:
            # Then each .py has its CPython 3.13 .pyc next to it ...
            pyc = source.parent / "__pycache__" / f"{source.stem}.cpython-313.pyc"
            if not pyc.is_file():
                missing.append(str(source.relative_to(build)))
                continue
            # ... compiled from exactly this source, hash-based and never checked at import
            header = pyc.read_bytes()[:16]
            flags = int.from_bytes(header[4:8], "little")
            if (
                header[:4] != MAGIC_313
                or flags != UNCHECKED_HASH_FLAGS
                or header[8:16] != importlib.util.source_hash(source.read_bytes())
            ):
                wrong.append(f"{source.relative_to(build)} (flags {flags:#b})")
            counted += 1
    assert not missing, f"{len(missing)} modules without .pyc, e.g. {missing[:5]}"
    assert not wrong, f"{len(wrong)} .pyc not unchecked-hash 3.13 of their source: {wrong[:5]}"
    # And the dependencies are there, not only our modules (boto3, botocore, pydantic ...)
    assert counted > 500


@pytest.mark.parametrize("arch", ["arm64", "x86_64"])
def test_layer_has_the_package_and_wheels_for_its_architecture(
    builds: dict[str, Path], arch: str
) -> None:
    python = builds[arch] / "CommonLayer" / "python"
    assert (python / "webhook_pipeline" / "__init__.py").is_file()
    assert (python / "sources.toml").is_file()
    assert not (python / "bin").exists(), "console scripts with the build host's shebang"
    extensions = sorted(python.rglob("*.so"))
    assert any(p.parent.name == "pydantic_core" for p in extensions)
    for extension in extensions:
        machine = int.from_bytes(extension.read_bytes()[18:20], "little")  # ELF e_machine
        assert machine == ELF_MACHINE[arch], f"{extension.name}: e_machine {machine}"


def test_the_interpreter_loads_the_shipped_bytecode(builds: dict[str, Path]) -> None:
    # Given the build for this machine's architecture
    arch = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine())
    if arch is None or sys.version_info[:2] != (3, 13):
        pytest.skip(f"no build for {platform.machine()} / Python {sys.version.split()[0]}")
    build = builds[arch]
    layer = build / "CommonLayer" / "python"
    # When the ingest module's dependencies are imported from it, verbosely, on a read-only view
    # of the code (no bytecode written, as in Lambda)
    probe = subprocess.run(
        [sys.executable, "-I", "-B", "-v", "-c",
         f"import sys; sys.path[:0] = [{str(build / 'IngestFunction')!r}, {str(layer)!r}]; "
         "import webhook_pipeline.ingest, webhook_pipeline.webhook_request, boto3, pydantic"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr[-2000:]
    loaded = [line for line in probe.stderr.splitlines() if line.startswith("# code object from ")]
    # Then every module of the build came from its .pyc, none was compiled from source (a
    # source-compiled module shows as "code object from '.../name.py'")
    from_layer = [line for line in loaded if str(build) in line]
    assert len(from_layer) > 100
    assert all(line.rstrip("'").endswith(".pyc") for line in from_layer), from_layer[:5]
