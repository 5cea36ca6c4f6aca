"""The artifact's folder on disk: where a save may write (never over what is
not an artifact), the temporary folders of unfinished saves, the linker for
another architecture's library, and the library's digest."""

from __future__ import annotations

import hashlib
import os
import re
import shutil

from ..errors import ArtifactError

MANIFEST = "manifest.json"


def linker(manifest: dict, path: str) -> dict:
    """``export_library``'s arguments: the system's compiler links code for
    this machine; code for another architecture needs a linker for that one."""
    from ..targets import detect

    arch = (manifest.get("requires") or {}).get("arch")
    if arch in (None, detect.arch()):
        return {}
    for name in (f"{arch}-linux-gnu-g++", f"{arch}-linux-gnu-gcc"):
        if shutil.which(name):
            from tvm.support import cc

            return {"fcompile": cc.cross_compiler(name)}
    raise ArtifactError(f"{path}: the model is built for {arch}; writing its lib.so needs a linker for {arch}: "
                        f"{arch}-linux-gnu-g++ on PATH (Debian/Ubuntu: apt install "
                        f"g++-{arch.replace('_', '-')}-linux-gnu), or compile on an {arch} machine")


#: Temporary folders of unfinished saves: ``.braze-PID-XXXX`` beside the artifact.
TEMP_PREFIX = ".braze-"


def check_output_path(path: str) -> None:
    """Only an artifact (a folder with a manifest) or an empty folder may be overwritten."""
    if os.path.isdir(path):
        if os.listdir(path) and not os.path.isfile(os.path.join(path, MANIFEST)):
            raise ArtifactError(f"{path}: exists and is not a braze artifact; refusing to replace it "
                                "(choose another output path or remove the folder)")
    elif os.path.lexists(path):
        raise ArtifactError(f"{path}: exists and is a file, not an artifact folder; choose another output path")


def remove_stale_temps(parent: str) -> None:
    """Remove the temporary folders of saves whose process died (killed mid-way);
    a live process's folder is left alone."""
    for name in os.listdir(parent):
        m = re.fullmatch(re.escape(TEMP_PREFIX) + r"(\d+)-\w+", name)
        if m and not _alive(int(m.group(1))):
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def library_key(path: str, digest: str | None) -> tuple:
    st = os.stat(path)
    return (os.path.realpath(path), digest or (st.st_size, st.st_mtime_ns))


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
