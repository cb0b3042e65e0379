"""The one thing pyproject.toml cannot say: install the top-level folders under the ``robosteer`` package.

``policies/``, ``sim/``, ``real/`` and ``scripts/`` stay where they are in the repository; in site-packages
they become ``robosteer.policies`` and so on (package-dir), so no generic top-level name is installed.
"""

from setuptools import find_packages, setup

SUBPACKAGES = ("policies", "sim", "real", "scripts")  # as robosteer/__init__.py

packages = ["robosteer"]
package_dir = {"robosteer": "robosteer"}
for top in SUBPACKAGES:
    package_dir[f"robosteer.{top}"] = top
    packages += [f"robosteer.{top}", *(f"robosteer.{top}.{sub}" for sub in find_packages(top))]

setup(packages=packages, package_dir=package_dir)
