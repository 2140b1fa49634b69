"""The modules a user's policy files are imported as: `lab.userfiles.<stem>_<hash of the file's path>`, a name that
any process with the project on sys.path can import again (a pool a policy starts with spawn, macOS's and Windows'
default, reads the policy's functions by their module's name: a name of its own that no other process could import
left that pool waiting for ever). Importing the name imports this module first, which finds the file on sys.path
(where specs put its folder)."""
import hashlib
import importlib.machinery
import importlib.util
import os
import pathlib
import re
import sys

__path__ = []  # a package of no folder: its modules are the policy files, found by `_Files`


def name(path: pathlib.Path) -> str:
    """The module a policy file (its resolved path) is imported as: two files of one name are two modules, and a
    stem that is no identifier ("mine.v2") a name all the same."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"{__name__}.{stem}_{hashlib.sha1(os.fsencode(path)).hexdigest()[:8]}"


def spec(path: pathlib.Path):
    """The import spec of a policy file (its resolved path)."""
    return importlib.util.spec_from_file_location(module := name(path), path, loader=_Loader(module, str(path)))


class _Loader(importlib.machinery.SourceFileLoader):
    def exec_module(self, module):
        module.__package__ = ""  # no package of its own: a relative import in it ("from .. import zoo") would read
        super().exec_module(module)  # the project's lab/, so it is refused as a script's is


class _Files:
    """Finds `lab.userfiles.<stem>_<hash>` among the .py files of the folders on sys.path."""
    def find_spec(self, fullname, path=None, target=None):
        if not (m := re.fullmatch(rf"{re.escape(__name__)}\.(\w+)_[0-9a-f]{{8}}", fullname)):
            return None
        for folder in (f for f in sys.path if isinstance(f, str)):
            try:
                files = [f.resolve() for f in pathlib.Path(folder or ".").glob("*.py")
                         if re.sub(r"\W", "_", f.stem) == m[1]]
            except OSError:
                continue
            if file := next((f for f in files if f.is_file() and name(f) == fullname), None):
                return spec(file)
        return None


sys.meta_path.append(_Files())
