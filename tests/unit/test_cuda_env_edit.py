"""roles/cuda_links/library/cuda_ld_library_path.py: the line rewriting, on the lines NVIDIA's install guide and
rented images write (LD_LIBRARY_PATH and, issue 17 item 7, PATH naming a toolkit that is not the chosen one)."""

import importlib.util
import pathlib
import subprocess

import pytest

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


def test_path_naming_another_toolkit_follows_usr_local_cuda():
    after, removed, disabled = mod.rewrite(GUIDE, ["/usr/local/cuda-11.8/bin"], "shell", "PATH", "/usr/local/cuda/bin")
    assert after.split("\n")[0] == "export PATH=/usr/local/cuda/bin${PATH:+:${PATH}}"
    assert after.split("\n")[1] == GUIDE.split("\n")[1]  # LD_LIBRARY_PATH untouched by a PATH edit
    assert removed == [{"line": 1, "path": "/usr/local/cuda-11.8/bin"}] and disabled == []


@pytest.mark.parametrize("line,want", [
    ('PATH="/usr/local/cuda-11.8/bin:/usr/local/sbin:/usr/bin:/bin"',  # /etc/environment, quoted
     'PATH="/usr/local/cuda/bin:/usr/local/sbin:/usr/bin:/bin"'),
    ("export PATH=$PATH:/usr/local/cuda-11.8/bin:/usr/local/cuda/bin",  # already names the link: just drop it
     "export PATH=$PATH:/usr/local/cuda/bin"),
    ("export PATH=/opt/conda/bin:$PATH", "export PATH=/opt/conda/bin:$PATH"),  # nothing of CUDA: unchanged
    ("# export PATH=/usr/local/cuda-11.8/bin:$PATH", "# export PATH=/usr/local/cuda-11.8/bin:$PATH"),
    ("export CUDA_PATH=/usr/local/cuda-11.8/bin", "export CUDA_PATH=/usr/local/cuda-11.8/bin"),  # another variable
])
def test_path_lines(line, want):
    syntax = "pam_env" if line.startswith("PATH=") else "shell"
    got, _removed, _disabled = mod.rewrite_line(line, ["/usr/local/cuda-11.8/bin"], syntax, "PATH",
                                                "/usr/local/cuda/bin")
    assert got == want


def test_a_path_line_left_with_only_the_inherited_value_is_disabled_without_substitute():
    got, removed, disabled = mod.rewrite_line("export PATH=/usr/local/cuda-11.8/bin:$PATH",
                                              ["/usr/local/cuda-11.8/bin"], "shell", "PATH")
    assert disabled and got.startswith(": # disabled by gpufleet cuda_links: it put another CUDA toolkit's bin on PATH")


def test_rewritten_shell_files_still_parse(tmp_path):
    after, _r, _d = mod.rewrite("if [ -d /usr/local/cuda-11.8 ]; then\n  " + GUIDE.split("\n")[0] + "\nfi\n",
                                ["/usr/local/cuda-11.8/bin"], "shell", "PATH")
    script = tmp_path / "cuda.sh"
    script.write_text(after)
    assert subprocess.run(["sh", "-n", str(script)], check=False).returncode == 0
