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

__path__ = []  # a package of no folder: its modules are the policy files, found by `_Files`


def name(path: pathlib.Path) -> str:
    """The module a policy file (its resolved path) is imported as: two files of one name are two modules, and a
    stem that is no identifier ("mine.v2") a name all the same."""
    stem = re.sub(r"\W", "_", path.stem)
    return f"{__name__}.{stem}_{os.fsencode(path).hex()}"


def spec(path: pathlib.Path):
    """The import spec of a policy file (its resolved path)."""
    return importlib.util.spec_from_file_location(module := name(path), path, loader=_Loader(module, str(path)))


class _Loader(importlib.machinery.SourceFileLoader):
    def exec_module(self, module):
        module.__package__ = ""  # no package of its own: a relative import in it ("from .. import zoo") would read
        if (folder := os.path.dirname(self.path)) not in sys.path:  # the project's lab/, so it is refused as a script's
            sys.path.append(folder)  # is; its helpers import from beside it, as where it was named (lab/specs.py)
        super().exec_module(module)

    def get_code(self, fullname):  # the file's bytes as they are now, as where it was named (lab/specs.py): not a
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)  # __pycache__ copy, which an
    # edit of the same size within a second leaves standing


class _Files:
    """Finds `lab.userfiles.<stem>_<path in hex>`: the file at that path, if it is still there."""
    def find_spec(self, fullname, path=None, target=None):
        if not (m := re.fullmatch(rf"{re.escape(__name__)}\.\w*_((?:[0-9a-f]{{2}})+)", fullname)):
            return None
        file = pathlib.Path(os.fsdecode(bytes.fromhex(m[1])))
        return spec(file) if file.is_file() and name(file) == fullname else None


sys.meta_path.append(_Files())
