"""Packaging: the user's top-level folders install as sub-packages of one namespace.

``llmrec/`` is the core package; ``pipelines/ serving/ models/ tuning/ cluster/`` keep their
place in the checkout but import as ``llmrec.pipelines``, ``llmrec.serving``, … (setuptools
``package_dir``). A wheel therefore holds one top-level package, ``llmrec``; the editable
install (``pip install -e .``) maps the same names onto the checkout. Packages are found
by walking the folders, so a new benchmark or engine package needs no edit here; folders of data
files (``templates/``, ``cluster/kuberay/``) are listed as (namespace) packages too, so setuptools
installs their files as package data without a warning per folder.
Everything else (metadata, dependencies) is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

FOLDERS = ("pipelines", "serving", "models", "tuning", "cluster")
NOT_PACKAGES = ["__pycache__", "*.__pycache__"]

package_dir = {"llmrec": "llmrec"}
packages = ["llmrec"] + [f"llmrec.{p}" for p in find_namespace_packages("llmrec", exclude=NOT_PACKAGES)]
for folder in FOLDERS:
    package_dir[f"llmrec.{folder}"] = folder
    packages += [f"llmrec.{folder}"] + [f"llmrec.{folder}.{p}"
                                        for p in find_namespace_packages(folder, exclude=NOT_PACKAGES)]

setup(package_dir=package_dir, packages=packages)
