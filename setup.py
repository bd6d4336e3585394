"""The package list: each top-level folder installs as nnscope.<folder> (package-dir in pyproject.toml)."""
from setuptools import find_packages, setup

FOLDERS = ("runtime", "tracing", "parse_systrace", "vlog", "timing", "dashboards")
PACKAGES = find_packages(include=[pattern for folder in FOLDERS for pattern in (folder, f"{folder}.*")])

setup(packages=[f"nnscope.{package}" for package in PACKAGES])
