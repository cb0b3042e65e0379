"""robosteer: expressive robot policies trained by imitation, then steered by RL and value guidance.

The repository keeps ``policies/``, ``sim/``, ``real/`` and ``scripts/`` at its top level. An installed copy
holds them under this package (setuptools' package-dir, in ``setup.py``), so ``robosteer`` is the only name
it adds to site-packages and ``robosteer.policies`` the only name a class is ever loaded under. In a
checkout (the editable install, or ``PYTHONPATH=<repo>`` as ``.venv-gpu`` and ``make faults`` use) the
subpackages sit beside this folder, so its search path reaches up to them.
"""

from pathlib import Path

SUBPACKAGES = ("policies", "sim", "real", "scripts")

_here = Path(__file__).resolve().parent
if not (_here / "policies").is_dir() and (_here.parent / "policies" / "__init__.py").is_file():
    __path__.append(str(_here.parent))  # a checkout: robosteer.policies is <repo>/policies
