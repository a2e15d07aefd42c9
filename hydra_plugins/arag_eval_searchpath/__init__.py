"""Config groups shipped by installed packages (plugins), found with no edit here.

A package that adds a system, scorer, provider or dataset adapter ships its YAML (e.g.
``mypkg/conf/system/my_rag.yaml``) and names the folder in the entry-point group
``arag_eval.conf``:

    [project.entry-points."arag_eval.conf"]
    mypkg = "mypkg.conf"

Hydra finds this module (the ``hydra_plugins`` namespace) and appends ``pkg://mypkg.conf``
to the config search path, so ``system=my_rag`` composes like a built-in.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

GROUP = "arag_eval.conf"


class InstalledPackagesSearchPath(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
            search_path.append(provider=f"arag-eval plugin {ep.name}", path=f"pkg://{ep.value}")
