"""A PEP 517 / PEP 660 build backend for the tfm package, standard library only.

The package is pure Python (ctypes over libtfm.so), so a wheel is the tfm/ directory, its metadata, and one
generated module, tfm/_build_path.py, naming the build/libtfm.so of the source tree the wheel was built from
(one of the places tfm looks for the library: docs/PYTHON.md). Having no requirements, `pip install ./python`
works offline, with build isolation, and without setuptools.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent          # python/
PACKAGE = ROOT / "tfm"
TIMESTAMP = (2020, 1, 1, 0, 0, 0)                       # fixed: the same sources give the same wheel


def _project() -> dict:
    """name, version, description, requires-python from pyproject.toml's [project] table (simple string keys;
    tomllib is not in every supported Python)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', table, re.M))


def _dist_info(p: dict) -> str:
    return f"{p['name']}-{p['version']}.dist-info"


def _metadata(p: dict) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    return (f"Metadata-Version: 2.1\nName: {p['name']}\nVersion: {p['version']}\nSummary: {p['description']}\n"
            f"Requires-Python: {p['requires-python']}\nDescription-Content-Type: text/markdown\n\n{readme}")


def _package_files() -> list:
    return sorted(f for f in PACKAGE.iterdir() if f.is_file() and f.suffix in (".py", ".typed")
                  and f.name != "_build_path.py")


class _Wheel:
    """A wheel being written: files added with their RECORD lines."""

    def __init__(self, path: Path):
        self.zip = zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, name: str, data: bytes) -> None:
        info = zipfile.ZipInfo(name, TIMESTAMP)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append(f"{name},sha256={digest},{len(data)}")

    def close(self, dist_info: str) -> None:
        self.record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", TIMESTAMP)
        info.external_attr = 0o644 << 16
        self.zip.writestr(info, "\n".join(self.record) + "\n")
        self.zip.close()


def _build(wheel_directory: str, editable: bool) -> str:
    p = _project()
    name = f"{p['name']}-{p['version']}-py3-none-any.whl"
    dist_info = _dist_info(p)
    w = _Wheel(Path(wheel_directory) / name)
    if editable:   # PEP 660: a .pth line puts python/ on sys.path, the sources are used in place
        w.add(f"{p['name']}.pth", (str(ROOT) + "\n").encode())
    else:
        for f in _package_files():
            w.add(f"tfm/{f.name}", f.read_bytes())
        lib = ROOT.parent / "build" / "libtfm.so"
        w.add("tfm/_build_path.py", ('"""Written by the build backend: the source tree this package was installed '
                                      f'from."""\nLIBRARY = {str(lib)!r}\n').encode())
    w.add(f"{dist_info}/METADATA", _metadata(p).encode())
    w.add(f"{dist_info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: tfm_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    w.add(f"{dist_info}/top_level.txt", b"tfm\n")
    w.close(dist_info)
    return name


def get_requires_for_build_wheel(config_settings=None) -> list:
    return []


def get_requires_for_build_editable(config_settings=None) -> list:
    return []


def get_requires_for_build_sdist(config_settings=None) -> list:
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    return _build(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None) -> str:
    return _build(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None) -> str:
    p = _project()
    base = f"{p['name']}-{p['version']}"
    files = [ROOT / "pyproject.toml", ROOT / "README.md", ROOT / "_backend" / "tfm_build.py"] + _package_files()
    with tarfile.open(Path(sdist_directory) / f"{base}.tar.gz", "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in files + [None]:
            data = _metadata(p).encode() if f is None else f.read_bytes()
            arc = f"{base}/PKG-INFO" if f is None else f"{base}/{f.relative_to(ROOT).as_posix()}"
            info = tarfile.TarInfo(arc)
            info.size, info.mode, info.mtime = len(data), 0o644, 1577836800
            tar.addfile(info, io.BytesIO(data))
    return f"{base}.tar.gz"
