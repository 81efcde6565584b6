"""scripts/wheel-markers: what a wheelhouse lacks for another Python than the controller's, because pip download
--python-version evaluates the dependencies' markers for the Python it runs on (tomli for JupyterLab on 3.10)."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def wheel(folder, name, version, requires=()):
    path = folder / ("%s-%s-py3-none-any.whl" % (name, version))
    meta = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    meta += "".join("Requires-Dist: %s\n" % r for r in requires)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("%s-%s.dist-info/METADATA" % (name, version), meta)
    return path.name


def missing(folder, python, *listed):
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "wheel-markers"), str(folder), python, *listed],
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def test_a_marker_true_only_for_the_target_python_is_named(tmp_path):
    top = wheel(tmp_path, "jupyterlab", "4.6.6", ['tomli>=1.2.2; python_version < "3.11"', "httpx>=0.25"])
    wheel(tmp_path, "httpx", "0.29.0", ['exceptiongroup; python_version < "3.11"'])
    assert missing(tmp_path, "3.10", top) == ["tomli>=1.2.2", "exceptiongroup"]
    assert missing(tmp_path, "3.11", top) == []
    assert missing(tmp_path, "3.13", top) == []
    # once the folder has them, nothing is left to fetch (a version that does not satisfy does not count)
    wheel(tmp_path, "tomli", "1.0.0")
    assert missing(tmp_path, "3.10", top) == ["tomli>=1.2.2", "exceptiongroup"]
    wheel(tmp_path, "tomli", "2.5.0")
    wheel(tmp_path, "exceptiongroup", "1.3.2", ['typing-extensions>=4.6; python_version < "3.13"'])
    assert missing(tmp_path, "3.10", top) == ["typing-extensions>=4.6"]


def test_extras_asked_by_a_dependent_are_followed(tmp_path):
    top = wheel(tmp_path, "jupyter_events", "0.12.0", ["jsonschema[format-nongpl]>=4.18"])
    wheel(tmp_path, "jsonschema", "4.26.0", ['rfc3339-validator; extra == "format-nongpl"',
                                              'isoduration; extra == "format"'])
    assert missing(tmp_path, "3.12", top) == ["rfc3339-validator"]
