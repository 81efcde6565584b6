"""roles/cuda_links/library/cuda_ld_library_path.py: the line rewriting, on the lines NVIDIA's install guide writes."""

import importlib.util
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODULE = ROOT / "roles/cuda_links/library/cuda_ld_library_path.py"
_spec = importlib.util.spec_from_file_location("cuda_env_edit", MODULE)
mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mod)

GUIDE = ("export PATH=/usr/local/cuda-11.8/bin${PATH:+:${PATH}}\n"
         "export LD_LIBRARY_PATH=/usr/local/cuda-11.8/lib64${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}\n")


def test_ld_library_path_line_of_the_install_guide_is_disabled_and_path_left():
    after, removed, disabled = mod.rewrite(GUIDE, ["/usr/local/cuda-11.8/lib64"], "shell")
    lines = after.split("\n")
    assert lines[0] == "export PATH=/usr/local/cuda-11.8/bin${PATH:+:${PATH}}"
    assert lines[1].startswith(": # disabled by gpufleet cuda_links") and removed == [
        {"line": 2, "path": "/usr/local/cuda-11.8/lib64"}] and disabled == [2]


def test_rewritten_shell_files_still_parse(tmp_path):
    after, _r, _d = mod.rewrite("if [ -d /usr/local/cuda-11.8 ]; then\n  " + GUIDE.split("\n")[1] + "\nfi\n",
                                ["/usr/local/cuda-11.8/lib64"], "shell")
    script = tmp_path / "cuda.sh"
    script.write_text(after)
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
