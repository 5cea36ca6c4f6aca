"""Tools over the compiler: kernel listings (``listing``), schedule
experiments (``experiment``, ``isolate``) and the tuning driver (``tune``).
They sit above ``braze.compiler`` and ``braze.runtime``; nothing below
imports them (tests/project/test_layers.py).
"""
