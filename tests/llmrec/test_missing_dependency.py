"""MissingDependency names the extra that provides a package, and no extra for llmrec's own dependencies."""

from __future__ import annotations

from llmrec.errors import MissingDependency


def test_an_optional_package_names_its_extra():
    msg = str(MissingDependency("llamacpp engine", "llama-cpp-python", "cpu"))
    assert "'llama-cpp-python'" in msg and "pip install 'llmrec[cpu]'" in msg


def test_a_core_dependency_names_no_extra():
    msg = str(MissingDependency("the PrefEval rag method", "faiss-cpu", None))
    assert "'faiss-cpu'" in msg and "llmrec[" not in msg and "dependency of llmrec itself" in msg
