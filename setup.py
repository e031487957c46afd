"""Package discovery: the design card's folders are installed under one namespace.

hdl/ -> tessera.hdl, golden/ -> tessera.golden, tb/ -> tessera.tb,
sim_models/ -> tessera.sim_models, tessera/ -> tessera.  Every folder with an
__init__.py below them is a package; nothing needs listing by hand.
"""
import os

from setuptools import setup

ROOTS = {"tessera": "tessera", "tessera.hdl": "hdl", "tessera.golden": "golden",
         "tessera.tb": "tb", "tessera.sim_models": "sim_models"}


def discover():
    packages, package_dir = [], {}
    for pkg, root in ROOTS.items():
        package_dir[pkg] = root
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith((".", "__"))]
            if "__init__.py" not in filenames:
                continue
            rel = os.path.relpath(dirpath, root)
            name = pkg if rel == "." else pkg + "." + rel.replace(os.sep, ".")
            packages.append(name)
    return packages, package_dir


packages, package_dir = discover()
setup(packages=packages, package_dir=package_dir,
      package_data={"": ["*.json", "*.yaml", "*.toml", "*.csv", "*.vlt", "*.v"]})
