"""The modules a user's policy files are imported as: `lab.userfiles.<stem>_<the file's path in hex>`, a name that
any process with the project on sys.path can import again (a pool a policy starts with spawn, macOS's and Windows'
default, reads the policy's functions by their module's name: a name of its own that no other process could import
left that pool waiting for ever). Importing the name imports this module first, whose finder reads the file's path
from the name itself: not from sys.path, which a script may have put back since, nor from the folder it runs in."""
import importlib.machinery
import importlib.util
import os
import pathlib
import re
import sys

from engine import guards

__path__ = []  # a package of no folder: its modules are the policy files, found by `_Files`
FOLDERS = set()  # the folders of the policy files imported in this process: their helpers are read as they are now


def name(path: pathlib.Path) -> str:
    """The module a policy file (its resolved path) is imported as: two files of one name are two modules, and a
    stem that is no identifier ("mine.v2") a name all the same."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"{__name__}.{stem}_{os.fsencode(path).hex()}"


def spec(path: pathlib.Path):
    """The import spec of a policy file (its resolved path)."""
    FOLDERS.add(os.path.dirname(path))
    return importlib.util.spec_from_file_location(module := name(path), path, loader=_Loader(module, str(path)))


class _Fresh(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname):
        """The file's bytes as they are now, as where a policy file is named (lab/specs.py): not a __pycache__ copy,
        which an edit of the same size within a second (or `cp -p`, an archive unpacked) leaves standing."""
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


class _Loader(_Fresh):
    def exec_module(self, module):
        module.__package__ = ""  # no package of its own: a relative import in it ("from .. import zoo") would read
        # the project's lab/, so it is refused as a script's is
        if (folder := os.path.dirname(self.path)) not in sys.path:  # its helpers import from beside it, as where it
            sys.path.append(folder)  # was named (lab/specs.py)
        super().exec_module(module)


class _Beside:
    """Finds a module in a policy file's folder or below it (a helper it imports) as Python would, to be read by
    `_Fresh`: the policy's key hashes the helper's file, so the numbers are measured with that file's code."""
    def find_spec(self, fullname, path=None, target=None):
        if not FOLDERS or not (found := importlib.machinery.PathFinder.find_spec(fullname, path)) or \
                type(found.loader) is not importlib.machinery.SourceFileLoader:
            return None  # (Python's own finders then find it, as before)
        origin = pathlib.Path(os.path.realpath(found.origin))  # (a folder on sys.path through a link: its file)
        if not any(origin.is_relative_to(f) for f in tuple(FOLDERS)) or \
                any(origin.is_relative_to(p) for p in guards._INSTALLED_REAL):  # (a copy of FOLDERS: another thread
            return None  # may name a policy meanwhile; Python's own and installed packages: a venv in a policy's folder)
        found.loader = _Fresh(fullname, found.origin)
        return found


class _Files:
    """Finds `lab.userfiles.<stem>_<path in hex>`: the file at that path, if it is still there."""
    def find_spec(self, fullname, path=None, target=None):
        if not (m := re.fullmatch(rf"{re.escape(__name__)}\.\w*_((?:[0-9a-f]{{2}})+)", fullname)):
            return None
        file = pathlib.Path(os.fsdecode(bytes.fromhex(m[1])))
        return spec(file) if file.is_file() and name(file) == fullname else None


sys.meta_path.append(_Files())
sys.meta_path.insert(next((i for i, f in enumerate(sys.meta_path) if f is importlib.machinery.PathFinder),
                          len(sys.meta_path)), _Beside())  # just before Python's own finder of files: after its
# built-in and frozen modules (a policy's folder holding "faulthandler.py") and after import hooks (pytest's rewriting)
