"""Packaging: the user's top-level folders install as sub-packages of one namespace.

``llmrec/`` is the core package; ``pipelines/ serving/ models/ tuning/ cluster/`` keep their
place in the checkout but import as ``llmrec.pipelines``, ``llmrec.serving``, … (setuptools
``package_dir``). A wheel therefore holds one top-level package, ``llmrec``; the editable
install (``pip install -e .``) maps the same names onto the checkout. Packages are found
by walking the folders, so a new benchmark or engine package needs no edit here.
Everything else (metadata, dependencies) is in pyproject.toml.
"""

from setuptools import find_packages, setup

FOLDERS = ("pipelines", "serving", "models", "tuning", "cluster")

package_dir = {"llmrec": "llmrec"}
packages = ["llmrec"] + [f"llmrec.{p}" for p in find_packages("llmrec")]
for folder in FOLDERS:
    package_dir[f"llmrec.{folder}"] = folder
    packages += [f"llmrec.{folder}"] + [f"llmrec.{folder}.{p}" for p in find_packages(folder)]

setup(package_dir=package_dir, packages=packages)
