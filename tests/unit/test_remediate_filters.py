"""The remediate role's plan and record filters, on diagnoses made from recorded evidence."""

import importlib.util
import pathlib

import pytest
from gpufleet.host.doctor import diagnose as doctor
from gpufleet.host.doctor import rules as doctor_rules
from test_doctor import CASES, ev_cvd, ev_link, ev_xid79, healthy

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "remediate_filters", ROOT / "roles/remediate/filter_plugins/remediate.py")
rf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rf)


def dx(ev):
    result = doctor.diagnose(ev)
    result["evidence"] = ev
    return result


def test_every_fixable_rule_has_an_action_or_is_named_manual():
    fixable = {r["code"] for r in doctor_rules.RULES if r["remedy_class"] == "fixable"}
    assert set(rf.ACTIONS) <= fixable
    # not automated: see its remedy (the renter's thread settings, /dev/shm and pids.max of a VM)
    assert fixable - set(rf.ACTIONS) == {"error_804_forward_compat", "cpu_quota_below_visible_cpus", "pids_max_low",
                                         "shm_too_small"}


def test_role_defaults_and_known_codes_are_the_actions():
    import yaml
    defaults = yaml.safe_load((ROOT / "roles/remediate/defaults/main.yml").read_text())
    known = yaml.safe_load((ROOT / "roles/remediate/vars/main.yml").read_text())["__remediate_known_codes"]
    assert sorted(defaults["remediate_codes"]) == sorted(known) == sorted(rf.ACTIONS)


def test_healthy_host_plans_nothing():
    plan = rf.remediate_plan(dx(healthy()))
    assert plan["act"] is False and plan["why_not"] == "no findings" and plan["items"] == []
    assert rf.remediate_plan_lines(plan) == ["nothing to do: no findings"]


def test_broken_links_and_env_are_planned_in_order():
    ev = ev_cvd()
    ev["cudatk"] = ev_link()["cudatk"]
    plan = rf.remediate_plan(dx(ev))
    assert plan["act"] and plan["groups"] == ["env", "links"]
    lines = rf.remediate_plan_lines(plan)
    assert any(line.startswith("would fix cuda_visible_devices_empty_or_invalid by remove") for line in lines)


def test_only_when_unusable_leaves_working_hosts_alone():
    d = dx(ev_link())  # a warning only; torch works
    assert d["cuda_usable"] is True
    assert rf.remediate_plan(d)["act"] is False
    assert "CUDA is usable" in rf.remediate_plan(d)["why_not"]
    assert rf.remediate_plan(d, only_when_unusable=False)["act"] is True


def test_codes_not_allowed_are_not_fixed():
    plan = rf.remediate_plan(dx(ev_cvd()), codes=["cpu_only_wheel"])
    assert plan["act"] is False and plan["manual"] == ["cuda_visible_devices_empty_or_invalid"]


@pytest.mark.parametrize("code", ["xid_79_fallen_off_bus", "fewer_gpus_than_rented", "no_driver"])
def test_provider_findings_are_never_acted_on(code):
    plan = rf.remediate_plan(dx(CASES[code]()))
    assert code in plan["provider"] and all(i["code"] != code for i in plan["items"])


def test_reboot_only_when_allowed_and_never_in_a_container():
    d = dx(CASES["driver_library_mismatch"]())
    assert rf.remediate_plan(d)["reboot_now"] is False
    assert rf.remediate_plan(d, allow_reboot=True)["reboot_now"] is True
    d["evidence"]["in_container"] = True
    assert rf.remediate_plan(d, allow_reboot=True)["reboot_now"] is False


def test_record_fixed_still_broken_and_provider():
    ev = ev_cvd()
    ev["cudatk"] = ev_link()["cudatk"]
    ev["kernel_log"] = ev_xid79()["kernel_log"]
    before = dx(ev)
    plan = rf.remediate_plan(before)
    after_ev = ev_xid79()
    after_ev["env"] = {"CUDA_VISIBLE_DEVICES": ""}
    after = dx(after_ev)  # links fixed, env still there, Xid 79 of course still there
    rec = rf.remediate_record(before, after, plan, {"env": "fix_env | Refuse ...: set by the container"})
    assert rec["fixed"] == ["cuda_link_wrong_target"]
    assert rec["still_broken"] == [{"code": "cuda_visible_devices_empty_or_invalid",
                                    "why": "fix_env | Refuse ...: set by the container"}]
    assert [p["code"] for p in rec["needs_provider"]] == ["xid_79_fallen_off_bus"]
    assert rec["state"] == "still_broken"


def test_record_in_check_mode_is_the_plan():
    before = dx(ev_cvd())
    plan = rf.remediate_plan(before)
    rec = rf.remediate_record(before, None, plan, {}, check_mode=True)
    assert rec["state"] == "planned" and rec["acted"] is False and rec["fixed"] == []
    assert rec["planned"][0]["code"] == "cuda_visible_devices_empty_or_invalid"


def test_record_on_healthy_host():
    d = dx(healthy())
    assert rf.remediate_record(d, d, rf.remediate_plan(d))["state"] == "nothing_to_fix"


def test_driver_library_mismatch_is_a_reboot_not_the_provider():
    from test_doctor import ev_mismatch_as_gathered
    d = dx(ev_mismatch_as_gathered())
    record = rf.remediate_record(d, d, rf.remediate_plan(d))
    assert record["state"] == "needs_reboot" and record["needs_provider"] == []
    assert [e["code"] for e in record["needs_reboot"]] == ["driver_library_mismatch"]


def test_a_per_user_setting_left_alone_is_named_with_what_to_do():
    from test_doctor import ev_shadow
    before = ev_shadow()
    before["cudatk"]["ld_library_path"]["entries"] = [
        {"path": "/usr/local/cuda-11.8/lib64", "source": "/root/.bashrc", "shadowing": True},
        {"path": "/usr/local/cuda/lib64", "source": "environment", "shadowing": True}]
    d = dx(before)
    plan = rf.remediate_plan(d, only_when_unusable=False)
    record = rf.remediate_record(d, d, plan)
    why = record["still_broken"][0]["why"]
    assert record["state"] == "still_broken" and record["still_broken"][0]["code"] == "ld_library_path_shadowing"
    assert "/root/.bashrc, a per-user file gpufleet leaves alone" in why and "remove" in why
    assert "/usr/local/cuda/lib64 comes from the environment" in why
    # a global file the fix edits gives no such excuse
    before["cudatk"]["ld_library_path"]["entries"] = [
        {"path": "/usr/local/cuda-11.8/lib64", "source": "/etc/profile.d/cuda.sh", "shadowing": True}]
    d = dx(before)
    assert rf.remediate_record(d, d, plan)["still_broken"][0]["why"] == "the fix ran but the doctor still finds it"


def test_the_check_plan_names_the_torch_build_it_would_install():
    from test_doctor import ev_cpu
    before = dx(ev_cpu())
    plan = rf.remediate_plan(before)
    assert "torch" in plan["groups"], plan
    rec = rf.remediate_record(before, None, plan, {}, check_mode=True,
                              planned_details={"torch": "install torch==2.5.1+cu121 from https://download.pytorch.org/whl/cu121"})
    torch_items = [p for p in rec["planned"] if p["code"] == "cpu_only_wheel"]
    assert torch_items and torch_items[0]["would"] == "install torch==2.5.1+cu121 from https://download.pytorch.org/whl/cu121"
    assert all("would" not in p for p in rec["planned"] if p["code"] != "cpu_only_wheel")
