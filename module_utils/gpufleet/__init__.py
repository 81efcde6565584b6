"""gpufleet: pure logic behind the gpufleet Ansible modules (no Ansible imports)."""
