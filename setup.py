"""The one thing pyproject.toml cannot say without an experimental table: the C part.

The dds backend's per-message path (src/roboscale/backends/_dds_take.c, see dds_cdr) is
optional: without a C compiler and Python's headers the install goes on, and the
backend takes its samples through ctypes instead (`roboscale backends` says which).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "roboscale.backends._dds_take",
            ["src/roboscale/backends/_dds_take.c"],
            optional=True,
        )
    ]
)
