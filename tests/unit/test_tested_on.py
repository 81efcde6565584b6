"""The READMEs' platform claims are read from the hosts the tests run on, so none can go stale.

Each role README says where its role is run by the tests in one line:

    - Tested on: molecule/ssh_hardening: Ubuntu 22.04, Ubuntu 24.04 with systemd; make e2e, demo hosts 01-05: Debian 12

a ';'-separated list of sources, each `SOURCE: PLATFORM, PLATFORM`, where SOURCE is a molecule scenario
(`molecule/NAME`: the images of its molecule.yml platforms) or hosts of the demo fleet `make e2e` starts
(`make e2e, demo host 01`, `demo hosts 03, 04, 05`, `demo hosts 01-05`: their images in scripts/demo-fleet, the
fleet of `make demo`'s default DEMO_HOSTS). A platform is named as scripts/test-images names its image:
gpufleet/debian:12 is "Debian 12", gpufleet/ubuntu:24.04 "Ubuntu 24.04", gpufleet/ubuntu:24.04-systemd
"Ubuntu 24.04 with systemd". A note in parentheses after a platform is for the reader and not read. Each source must
name exactly its platforms: one it does not have (a release claimed but never run) fails, and so does one it has that
the line leaves out. A role with a scenario of its own name must name that scenario. README.md's few platform lists
(the demo hosts' releases, the ssh-audit hosts, the scenarios' releases) are read the same way.
"""
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
ROLE_READMES = sorted((ROOT / "roles").glob("*/README.md"))
SCENARIOS_DIR = ROOT / "molecule"

TESTED_ON = re.compile(r"^[ \t]*(?:[-*][ \t]+)?Tested on: (?P<claim>.+?)[ \t]*$", re.M)
NOTE = re.compile(r"\s*\([^()]*\)")
DEMO_SOURCE = re.compile(r"make e2e, demo hosts? (?P<hosts>\d\d(?:(?:, |-)\d\d)*)")
RELEASE_NAME = re.compile(r"\b(?:Debian|Ubuntu) \d")


def rel(path):
    return str(path.relative_to(ROOT))


# --- the hosts the tests run on ---------------------------------------------------------------------------------


def image_releases():
    """The releases scripts/test-images knows how to build (its codename() case)."""
    text = (ROOT / "scripts" / "test-images").read_text()
    body = re.search(r"^codename\(\) \{\n(.*?)^\}", text, re.M | re.S)
    assert body, "scripts/test-images has no codename() function to read the releases from"
    releases = re.findall(r"^\s*([\d.]+)\) echo \w+ ;;$", body.group(1), re.M)
    assert releases, "no release found in scripts/test-images' codename()"
    return releases


RELEASES = image_releases()


def platform_of(image):
    """gpufleet/debian:12 -> "Debian 12", gpufleet/ubuntu:24.04-systemd -> "Ubuntu 24.04 with systemd"."""
    match = re.fullmatch(r"gpufleet/(debian|ubuntu):([\d.]+)(-systemd)?", image)
    assert match, "%s is not an image scripts/test-images builds (gpufleet/debian:N, gpufleet/ubuntu:YY.MM)" % image
    distro, release, systemd = match.groups()
    assert release in RELEASES, "%s: scripts/test-images builds no release %s (it knows %s)" % (
        image, release, ", ".join(RELEASES))
    # scripts/test-images' distro(): a release with a dot is Ubuntu's, one without Debian's.
    assert ("." in release) == (distro == "ubuntu"), "%s: scripts/test-images would tag %s otherwise" % (image, release)
    return "%s %s%s" % (distro.capitalize(), release, " with systemd" if systemd else "")


def load_scenarios():
    """{scenario name: set of platforms} from molecule/*/molecule.yml."""
    scenarios = {}
    for path in sorted(SCENARIOS_DIR.glob("*/molecule.yml")):
        platforms = (yaml.safe_load(path.read_text()) or {}).get("platforms") or []
        assert platforms, "%s has no platforms" % rel(path)
        scenarios[path.parent.name] = {platform_of(p["image"]) for p in platforms}
    return scenarios


def load_demo_hosts():
    """{host number: platform} of make e2e's fleet (scripts/demo-fleet's images, the Makefile's DEMO_HOSTS)."""
    script = (ROOT / "scripts" / "demo-fleet").read_text()
    tags = re.search(r'^TAGS=\(""((?: [\d.]+)+)\)$', script, re.M)
    assert tags, "scripts/demo-fleet: no TAGS=(\"\" ...) line to read the demo hosts' releases from"
    tags = tags.group(1).split()
    # Past the listed hosts, tag_of alternates: an even host gets the first release, an odd one the second.
    fallback = re.search(r"elif \[ \$\(\(\$1 % 2\)\) = 0 \]; then echo ([\d.]+); else echo ([\d.]+); fi", script)
    assert fallback, "scripts/demo-fleet: tag_of's rule for hosts past TAGS changed; teach this test"
    assert 'case $t in *.*) echo "gpufleet/ubuntu:$t" ;; *) echo "gpufleet/debian:$t" ;; esac' in script, (
        "scripts/demo-fleet: image_of's naming changed; teach this test")
    count = re.search(r"^DEMO_HOSTS \?= (\d+)$", (ROOT / "Makefile").read_text(), re.M)
    assert count, "Makefile: no 'DEMO_HOSTS ?= N' line"
    hosts = {}
    for i in range(1, int(count.group(1)) + 1):
        tag = tags[i - 1] if i <= len(tags) else fallback.group(1 if i % 2 == 0 else 2)
        hosts[i] = platform_of("gpufleet/%s:%s" % ("ubuntu" if "." in tag else "debian", tag))
    return hosts


SCENARIOS = load_scenarios()
DEMO_HOSTS = load_demo_hosts()


# --- the claims ---------------------------------------------------------------------------------------------------


def claim_lines(path):
    return [m.group("claim") for m in TESTED_ON.finditer(path.read_text())]


def demo_host_numbers(spec):
    numbers = []
    for part in spec.split(", "):
        first, _, last = part.partition("-")
        numbers.extend(range(int(first), int(last or first) + 1))
    return numbers


def source_platforms(source):
    """The set of platforms a source names, or an error message."""
    if source.startswith("molecule/"):
        name = source[len("molecule/"):]
        if name not in SCENARIOS:
            return "there is no scenario %s (molecule/: %s)" % (source, ", ".join(sorted(SCENARIOS)))
        return SCENARIOS[name]
    demo = DEMO_SOURCE.fullmatch(source)
    if demo:
        numbers = demo_host_numbers(demo.group("hosts"))
        missing = [n for n in numbers if n not in DEMO_HOSTS]
        if missing:
            return "make e2e's demo fleet has hosts 01-%02d, not %s" % (
                len(DEMO_HOSTS), ", ".join("%02d" % n for n in missing))
        return {DEMO_HOSTS[n] for n in numbers}
    return "unknown source %r (molecule/NAME, or make e2e, demo hosts NN-NN)" % source


def parse_claim(claim):
    """'molecule/x: Debian 12, Ubuntu 24.04 (note); make e2e, demo host 01: Debian 12' -> [(source, [platforms])]."""
    groups = []
    for part in claim.rstrip(".").split(";"):
        source, sep, platforms = part.strip().partition(": ")
        assert sep, "%r: each source is followed by ': ' and its platforms" % part.strip()
        names = [name.strip() for name in NOTE.sub("", platforms).split(",")]
        groups.append((source.strip(), names))
    return groups


def mismatches(claim):
    """Every way a claim differs from the hosts its sources run on."""
    problems = []
    for source, names in parse_claim(claim):
        actual = source_platforms(source)
        if isinstance(actual, str):
            problems.append(actual)
            continue
        for name in names:
            if name not in actual:
                problems.append("%s is claimed for %s, which has no such host (it has: %s)" % (
                    name, source, ", ".join(sorted(actual))))
        for name in sorted(actual - set(names)):
            problems.append("%s is not claimed, yet %s runs on it" % (name, source))
        if len(names) != len(set(names)):
            problems.append("%s: a platform is named twice" % source)
    return problems


CLAIMED = [path for path in [README, *ROLE_READMES] if claim_lines(path)]


@pytest.mark.parametrize("readme", CLAIMED, ids=[rel(p) for p in CLAIMED])
def test_each_tested_on_line_names_exactly_the_hosts_its_sources_run_on(readme):
    problems = ["%s: %s" % (rel(readme), problem) for claim in claim_lines(readme) for problem in mismatches(claim)]
    assert not problems, "\n".join(problems)


ROLE_SCENARIOS = sorted(name for name in SCENARIOS if (ROOT / "roles" / name).is_dir())


@pytest.mark.parametrize("scenario", ROLE_SCENARIOS)
def test_a_role_with_its_own_scenario_claims_it(scenario):
    readme = ROOT / "roles" / scenario / "README.md"
    claims = claim_lines(readme)
    assert len(claims) == 1, "%s: %d 'Tested on:' lines, want one" % (rel(readme), len(claims))
    sources = [source for source, _ in parse_claim(claims[0])]
    assert "molecule/%s" % scenario in sources, "%s: its 'Tested on:' line leaves out molecule/%s (%s)" % (
        rel(readme), scenario, ", ".join(sorted(SCENARIOS[scenario])))


def sentences(text):
    """Prose sentences of a README outside code blocks and 'Tested on:' lines, with their line breaks undone."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    text = TESTED_ON.sub("", text)
    for paragraph in re.split(r"\n\s*\n", text):
        yield from re.split(r"(?<=[.;])\s+|\s+\|\s+", " ".join(paragraph.split()))


@pytest.mark.parametrize("readme", [README, *ROLE_READMES], ids=[rel(p) for p in [README, *ROLE_READMES]])
def test_no_tested_list_outside_the_tested_on_lines(readme):
    """'tested on Debian 13' in prose is the claim that went stale: platforms tested on belong in a Tested on: line."""
    stale = [s for s in sentences(readme.read_text())
             if re.search(r"(?<![\w-])tested\b", s, re.I) and RELEASE_NAME.search(s)]
    assert not stale, "%s: name the platforms tested on in its 'Tested on:' line, not in prose:\n%s" % (
        rel(readme), "\n".join(stale))


# --- the lists of releases in README.md and docs/testing.md -----------------------------------------------------


def releases(text):
    """'Ubuntu 20.04 and 22.04 and Debian 12' -> {"Ubuntu 20.04", "Ubuntu 22.04", "Debian 12"}."""
    found, distro = set(), None
    for word in re.findall(r"Debian|Ubuntu|\d+(?:\.\d+)?", text):
        if word in ("Debian", "Ubuntu"):
            distro = word
        else:
            assert distro, "%r: a release before any distribution" % text
            found.add("%s %s" % (distro, word))
    return found


def readme_text():
    """README.md and docs/testing.md (where the README's test-suite section moved, issue 49), whitespace undone."""
    return " ".join((README.read_text() + "\n" + (ROOT / "docs" / "testing.md").read_text()).split())


def test_readme_names_each_demo_host_release():
    listed = re.search(r"The demo fleet \(`scripts/demo-fleet up \d+`\) is \w+ containers on the releases rented "
                       r"images are built on \(([^)]*)\)", readme_text())
    assert listed, "README.md or docs/testing.md: the sentence listing the demo hosts' releases moved; teach this test"
    claimed = {}
    for hosts, release in re.findall(r"(\d\d(?:(?:, | and )\d\d)*) on ((?:Debian|Ubuntu) [\d.]+)", listed.group(1)):
        for host in re.findall(r"\d\d", hosts):
            claimed[int(host)] = release
    assert claimed == DEMO_HOSTS


def test_readme_names_the_releases_ssh_audit_runs_on():
    listed = re.search(r"ssh-audit's JSON against every demo host \(([^:]*):", readme_text())
    assert listed, "README.md or docs/testing.md: the sentence on ssh-audit's demo hosts moved; teach this test"
    assert releases(listed.group(1)) == set(DEMO_HOSTS.values())


def test_readme_names_the_releases_of_the_scenarios():
    listed = re.search(r"`molecule test` for each scenario under `molecule/` on (.*?) containers \(systemd ones",
                       readme_text())
    assert listed, "README.md or docs/testing.md: the sentence on the scenarios' releases moved; teach this test"
    every = set().union(*SCENARIOS.values())
    assert releases(listed.group(1)) == {name.replace(" with systemd", "") for name in every}
    assert any(name.endswith(" with systemd") for name in every), "no scenario has a systemd host any more"


def test_readme_names_the_scenarios_with_an_ubuntu_2004_host():
    listed = re.search(r"runs on Python 3\.8\.10 on the Ubuntu 20\.04 hosts of the (.*?) scenarios", readme_text())
    assert listed, "README.md or docs/testing.md: the sentence on Python 3.8.10's hosts moved; teach this test"
    for name in re.split(r", | and ", listed.group(1)):
        assert "Ubuntu 20.04" in SCENARIOS.get(name, ()), "molecule/%s has no Ubuntu 20.04 host" % name


# --- the reading itself --------------------------------------------------------------------------------------------


def test_a_claim_is_read_as_its_sources_run():
    assert platform_of("gpufleet/ubuntu:24.04-systemd") == "Ubuntu 24.04 with systemd"
    assert demo_host_numbers("01-03, 05") == [1, 2, 3, 5]
    claim = "molecule/ssh_hardening: %s" % ", ".join(sorted(SCENARIOS["ssh_hardening"]))
    assert mismatches(claim) == []
    assert mismatches(claim + ", Debian 13") == [
        "Debian 13 is claimed for molecule/ssh_hardening, which has no such host (it has: %s)"
        % ", ".join(sorted(SCENARIOS["ssh_hardening"]))]
    assert mismatches("molecule/ssh_hardening: Ubuntu 22.04") != []
    assert mismatches("make e2e, demo host 99: Debian 12") != []
    assert releases("Ubuntu 20.04, 22.04 and 24.04 and Debian 12 and 13") == {
        "Ubuntu 20.04", "Ubuntu 22.04", "Ubuntu 24.04", "Debian 12", "Debian 13"}
