"""The class deployment files (deploy/, docs/SCALING.md): syntax and agreement.

The one-server hub itself is exercised end to end by tests/test_e2e_hub.py; these tests
check what no cluster here can run (the Kubernetes values and image file) and the pieces
that must agree with each other and with the repository.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from course_tools import course_language
from deploy import make_course

TIER = "fast"  # course_tools/tiers.py

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
K8S = DEPLOY / "k8s"

DOCKER_INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
                       "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def _dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        pending = f"{pending} {line}".strip() if pending else line
        if pending.endswith("\\"):
            pending = pending[:-1].rstrip()
            continue
        word, _, rest = pending.partition(" ")
        out.append((word, rest.strip()))
        pending = ""
    assert not pending, f"{path}: the last instruction ends with a line continuation"
    return out


def test_dockerfile_syntax_and_sources() -> None:
    ins = _dockerfile_instructions(K8S / "Dockerfile")
    assert ins[0][0] == "FROM", "a Dockerfile starts with FROM"
    bad = [w for w, _ in ins if w not in DOCKER_INSTRUCTIONS]
    assert not bad, f"unknown Dockerfile instructions: {bad}"
    for word, args in ins:
        if word == "COPY":
            *sources, _dest = shlex.split(args)
            for src in sources:
                assert (REPO / src).exists(), f"Dockerfile copies {src}, which is not in the repository"
        if word in ("CMD", "ENTRYPOINT") and args.startswith("["):
            assert isinstance(json.loads(args), list)
    runs = " ".join(a for w, a in ins if w == "RUN")
    # The same environment as the one-server install: CPU torch pin, the hub extra, d2l without deps.
    chooser = (REPO / "scripts" / "install_torch.sh").read_text()
    pin = next(tok for tok in chooser.split() if tok.startswith("SPEC=${TORCH_SPEC:-")).split(":-")[1].rstrip("}")
    assert pin in runs, f"the image must install {pin}, like scripts/setup.sh"
    assert "scripts/install_torch.sh" in runs, "the image must choose the torch build as scripts/setup.sh does"
    assert '".[hub]"' in runs and '--no-deps "d2l==1.0.3"' in runs
    assert ("USER", "1000") in ins, "the image must not run learners as root"


def test_values_file_is_consistent() -> None:
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    single = values["singleuser"]
    assert single["image"]["name"] and str(single["image"]["tag"])
    mounts = {m["name"]: m["mountPath"] for m in single["storage"]["extraVolumeMounts"]}
    volumes = {v["name"]: v for v in single["storage"]["extraVolumes"]}
    assert set(mounts) == set(volumes)
    # The exchange is where the learners' nbgrader configuration looks for it.
    assert mounts["nbgrader-exchange"] == single["extraEnv"]["COURSE_EXCHANGE"]
    claim = volumes["nbgrader-exchange"]["persistentVolumeClaim"]["claimName"]
    docs = list(yaml.safe_load_all((K8S / "exchange-pvc.yaml").read_text()))
    pvc = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    assert pvc["metadata"]["name"] == claim and "ReadWriteMany" in pvc["spec"]["accessModes"]
    # The hub's Python compiles, and names only configuration folders the image has.
    code = values["hub"]["extraConfig"]["10-course-roles"]
    compile(code, "values.yaml:hub.extraConfig", "exec")
    dockerfile = (K8S / "Dockerfile").read_text()
    for role in ("learner", "instructor"):
        assert f"/opt/attention-course/config/{role}" in dockerfile
        assert (DEPLOY / "jupyter" / role / "nbgrader_config.py").exists()
    assert "/opt/attention-course/config/{role}" in code


def test_role_configuration() -> None:
    """Learners never get the Formgrader or assignment authoring; instructors do."""
    def load(role: str, name: str) -> dict:
        return json.loads((DEPLOY / "jupyter" / role / name).read_text())

    learner = load("learner", "jupyter_server_config.json")["ServerApp"]["jpserver_extensions"]
    teacher = load("instructor", "jupyter_server_config.json")["ServerApp"]["jpserver_extensions"]
    assert learner["nbgrader.server_extensions.formgrader"] is False
    assert learner["nbgrader.server_extensions.assignment_list"] is True
    assert learner["nbgrader.server_extensions.validate_assignment"] is True
    assert all(teacher.values())
    disabled = load("learner", "labconfig/page_config.json")["disabledExtensions"]
    assert disabled.get("@jupyter/nbgrader:formgrader") and disabled.get("@jupyter/nbgrader:create-assignment")
    assert not load("instructor", "labconfig/page_config.json")["disabledExtensions"]
    # The lab plugin ids exist in the installed nbgrader (a typo would silently disable nothing).
    import nbgrader

    ext = Path(sys.prefix) / "share" / "jupyter" / "labextensions" / "@jupyter" / "nbgrader" / "static"
    assert ext.is_dir(), f"no nbgrader lab extension in {ext}: `bash scripts/setup.sh` installs nbgrader with it"
    bundle = "".join(p.read_text(errors="replace") for p in ext.glob("*.js"))
    for plugin in disabled:
        assert f'"{plugin}"' in bundle or f"'{plugin}'" in bundle, f"{plugin} is not a plugin of nbgrader {nbgrader.__version__}"


def test_every_installed_package_is_in_the_image_and_the_build_copy() -> None:
    """The k8s image and deploy/install.sh build the course from a copy of some of the checkout:
    the copy holds every package pyproject.toml installs (the image lacked course_tools, which
    deploy/make_course.py imports) and the scripts the build runs."""
    import tomllib

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = sorted(p.rstrip("*") for p in include)
    copied = [shlex.split(a)[:-1] for w, a in _dockerfile_instructions(K8S / "Dockerfile") if w == "COPY"]
    copied_names = {src.rstrip("/") for sources in copied for src in sources}
    runs = " ".join(a for w, a in _dockerfile_instructions(K8S / "Dockerfile") if w == "RUN")
    assert set(packages) <= copied_names, f"the image does not copy {sorted(set(packages) - copied_names)}"
    for script in re.findall(r"bash (scripts/\S+\.sh)", runs):
        assert script in copied_names, f"the image runs {script} without copying it"
    build_copy = re.search(r"build_copy\(\) \{\n  cp -r ([^\n]*) \"\$BUILD/\"", (DEPLOY / "install.sh").read_text())
    assert build_copy is not None, "deploy/install.sh's build_copy changed shape: update this test"
    assert set(packages) <= set(build_copy[1].split()), f"deploy/install.sh's build copy lacks some of {packages}"


def test_one_kernel_installer() -> None:
    """scripts/setup.sh, deploy/install.sh and the image install the Jupyter kernel with one script
    (it keeps ipykernel's staging folder out of /tmp), never with their own command line."""
    for path in (REPO / "scripts" / "setup.sh", DEPLOY / "install.sh", K8S / "Dockerfile"):
        text = path.read_text()
        assert "scripts/install_kernel.sh" in text, path
        assert "ipykernel install" not in text, f"{path}: install the kernel with scripts/install_kernel.sh"


def test_shell_scripts_parse() -> None:
    for script in (DEPLOY / "install.sh", REPO / "scripts" / "setup_system.sh", REPO / "scripts" / "install_kernel.sh"):
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script}: {proc.stderr}"


def test_hub_config_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hub configuration loads with a course environment and a proxy on PATH."""
    from traitlets.config.loader import PyFileConfigLoader

    prefix = tmp_path / "prefix"
    (prefix / "venv" / "bin").mkdir(parents=True)
    (prefix / "venv" / "bin" / "jupyterhub-singleuser").write_text("#!/bin/sh\n")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    chp = bindir / "configurable-http-proxy"
    chp.write_text("#!/bin/sh\n")
    chp.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("COURSE_PREFIX", str(prefix))
    monkeypatch.setenv("COURSE_HUB_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("COURSE_HUB_PORT", "18000")
    monkeypatch.setenv("COURSE_LEARNER_GROUP", "class-a")
    cfg = PyFileConfigLoader("jupyterhub_config.py", path=str(DEPLOY)).load_config()
    assert cfg.JupyterHub.ip == "127.0.0.1" and cfg.JupyterHub.port == 18000
    assert cfg.JupyterHub.authenticator_class == "pam"
    assert cfg.PAMAuthenticator.allowed_groups == {"class-a", "course-instructors"}
    assert cfg.Spawner.cmd == [str(prefix / "venv" / "bin" / "jupyterhub-singleuser")]
    assert cfg.ConfigurableHTTPProxy.command == [str(chp)]
    assert callable(cfg.Spawner.pre_spawn_hook)
    assert (tmp_path / "state").is_dir()

    monkeypatch.setenv("COURSE_PREFIX", str(tmp_path / "missing"))
    with pytest.raises(SystemExit, match="deploy/install.sh"):
        PyFileConfigLoader("jupyterhub_config.py", path=str(DEPLOY)).load_config()


@pytest.mark.slow  # nbgrader generate_assignment: seconds of CPU, out of the fast tier
def test_make_course_never_releases_instructor_files(tmp_path: Path) -> None:
    """The course directory has the sources; the release has the learner notebook only."""
    mod = make_course
    ignore = mod.repo_ignore_list()
    assert "mistakes.py" in ignore
    course = tmp_path / "course"
    released = mod.make_course(course, ["lesson03_scoring"], course_id="c1", exchange=str(tmp_path / "x"))
    assert [p.name for p in released] == ["scoring.ipynb"]
    assert (course / "source" / "lesson03_scoring" / "mistakes.py").exists()
    assert mod.released_leaks(course / "release", ignore) == []
    files = sorted(p.relative_to(course / "release").as_posix() for p in (course / "release").rglob("*") if p.is_file())
    assert files == ["lesson03_scoring/scoring.ipynb"]
    # The released notebook is the learner version the repository ships.
    got = json.loads((course / "release" / "lesson03_scoring" / "scoring.ipynb").read_text())
    want = json.loads((REPO / "exercises" / "lesson03_scoring" / "scoring.ipynb").read_text())
    assert [c["source"] for c in got["cells"]] == [c["source"] for c in want["cells"]]
    assert "c1" in (course / "nbgrader_config.py").read_text()
    # The leak check itself catches a leaked file.
    (course / "release" / "lesson03_scoring" / "mistakes.py").write_text("")
    assert mod.released_leaks(course / "release", ignore) == [course / "release" / "lesson03_scoring" / "mistakes.py"]


def test_make_course_rejects_unknown_assignment(tmp_path: Path) -> None:
    mod = make_course
    with pytest.raises(SystemExit, match="no assignment nope"):
        mod.make_course(tmp_path / "c", ["nope"])


# --------------------------------------------------------------------------- a class in Chinese (issue 23)


@pytest.mark.slow  # 0.15 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_chinese_class_presets_jupyterlab_chinese_interface() -> None:
    mod = course_language
    base = json.loads((DEPLOY / "jupyter" / "lab-overrides.json").read_text())
    zh = mod.lab_overrides(base, "zh-CN")
    assert zh["@jupyterlab/translation-extension:plugin"] == {"locale": "zh_CN"}
    assert {k: v for k, v in zh.items() if k != "@jupyterlab/translation-extension:plugin"} == base, \
        "the class-wide settings stay; the locale is added"
    assert mod.lab_overrides(base, "en") == base and mod.lab_overrides(base, "zh_cn") == zh
    # the plugin id and setting exist in the installed JupyterLab, and its Chinese language pack is installed
    schema = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas" / "@jupyterlab" / "translation-extension" / "plugin.json"
    assert "locale" in json.loads(schema.read_text())["properties"], schema
    import importlib.util
    spec = importlib.util.find_spec("jupyterlab_language_pack_zh_CN")
    assert spec is not None, "jupyterlab-language-pack-zh-CN is not installed: `bash scripts/setup.sh`"
    assert (Path(spec.origin).parent / "locale" / "zh_CN").is_dir()
    with pytest.raises(SystemExit, match="unknown course language 'klingon'.*en, zh-CN"):
        mod.language("klingon")
    # the command install.sh runs, with the system's Python (standard library only)
    out = subprocess.run([sys.executable, "-I", str(DEPLOY / "course_language.py"), "overrides", "--language", "zh-CN"],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == zh
    env = dict(os.environ, COURSE_LANGUAGE="zh-CN")
    out = subprocess.run([sys.executable, "-I", str(DEPLOY / "course_language.py"), "overrides"],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert json.loads(out) == zh


def test_chinese_class_lays_out_the_chinese_lessons_and_assignments(tmp_path: Path) -> None:
    mod = course_language
    repo = tmp_path / "repo"
    for rel in ("notebooks/01_a.ipynb", "notebooks/03_b.ipynb", "notebooks/07b_c.ipynb", "solutions/lesson03_x/x.ipynb"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("{}")
    assert mod.lessons_dir("en", repo) == repo / "notebooks"
    assert mod.solutions_dir("en", repo) == repo / "solutions"
    with pytest.raises(SystemExit, match=r"zh/notebooks: lessons missing \(01_a.ipynb, 03_b.ipynb, 07b_c.ipynb\).*scripts/i18n.py build"):
        mod.lessons_dir("zh-CN", repo)
    # a lesson taught in parts (07b_...) counts like any other: the Chinese class needs it too
    for rel in ("zh/notebooks/01_a.ipynb", "zh/notebooks/03_b.ipynb"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("{}")
    with pytest.raises(SystemExit, match=r"zh/notebooks: lessons missing \(07b_c.ipynb\)"):
        mod.lessons_dir("zh-CN", repo)
    with pytest.raises(SystemExit, match=r"zh/solutions: assignments missing \(lesson03_x\).*scripts/i18n.py build"):
        mod.solutions_dir("zh-CN", repo)
    for rel in ("zh/notebooks/07b_c.ipynb", "zh/solutions/lesson03_x/x.ipynb"):
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text("{}")
    assert mod.lessons_dir("zh-CN", repo) == repo / "zh" / "notebooks"
    assert mod.solutions_dir("zh-CN", repo) == repo / "zh" / "solutions"
    # install.sh takes its lessons and settings from course_language.py, per COURSE_LANGUAGE
    script = (DEPLOY / "install.sh").read_text()
    assert 'COURSE_LANGUAGE=${COURSE_LANGUAGE:-en}' in script
    assert '-m deploy.course_language lessons --language "$COURSE_LANGUAGE"' in script
    assert '-m deploy.course_language overrides --language "$COURSE_LANGUAGE"' in script
    # one lesson glob: install.sh copies the lessons course_tools.lessons lists, and
    # course_language.py checks an edition with the same function
    assert '-m course_tools.lessons list "$LESSONS"' in script
    assert "[0-9][0-9]*_*.ipynb" not in script
    assert not hasattr(mod, "LESSON_GLOB") and hasattr(mod, "lesson_notebooks")
    assert "cp deploy/jupyter/lab-overrides.json" not in script


@pytest.mark.slow  # 0.13 s of CPU (a fast test stays under 0.1 s: course_tools/tiers.py)
def test_install_refuses_an_unknown_language_before_installing_anything(tmp_path: Path) -> None:
    env = dict(os.environ, COURSE_LANGUAGE="klingon", COURSE_PREFIX=str(tmp_path / "prefix"),
               COURSE_EXCHANGE=str(tmp_path / "exchange"))
    proc = subprocess.run(["bash", str(DEPLOY / "install.sh")], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    if os.geteuid() == 0:
        assert "unknown course language 'klingon'" in proc.stderr, proc.stderr
    else:
        assert "must run as root" in proc.stderr, proc.stderr
    assert not (tmp_path / "prefix").exists() and not (tmp_path / "exchange").exists()


@pytest.mark.slow
@pytest.mark.slow  # nbgrader generate_assignment: seconds of CPU, out of the fast tier
def test_make_course_in_chinese_releases_chinese_notebooks(tmp_path: Path) -> None:
    from course_tools.grading_dev.zh import build_chinese

    mod = make_course
    build_chinese(tmp_path, assignments=["lesson03_scoring"])
    course = tmp_path / "course"
    released = mod.make_course(course, ["lesson03_scoring"], course_id="c1", exchange=str(tmp_path / "x"),
                                  language="zh-CN", solutions=tmp_path / "zh" / "solutions")
    assert [p.name for p in released] == ["scoring.ipynb"]
    got = json.loads(released[0].read_text())
    assert got["metadata"]["course"]["language"] == "zh-CN"
    about = next(c for c in got["cells"] if c.get("id") == "about-the-checks")
    assert "".join(about["source"]).startswith("**关于检查。**")
    assert mod.released_leaks(course / "release", mod.repo_ignore_list()) == []
    # same code as the English release: the same answer key grades it
    want = json.loads((REPO / "exercises" / "lesson03_scoring" / "scoring.ipynb").read_text())
    assert [c["source"] for c in got["cells"] if c["cell_type"] == "code"] == \
        [c["source"] for c in want["cells"] if c["cell_type"] == "code"]
    with pytest.raises(SystemExit, match="unknown course language"):
        mod.make_course(tmp_path / "c2", ["lesson03_scoring"], language="fr")


def test_traditional_chinese_class_presets_the_zh_tw_interface_and_edition(tmp_path: Path) -> None:
    """COURSE_LANGUAGE=zh-TW (issue 32): JupyterLab's zh-TW interface for everyone, the zh-TW lessons
    and assignments; the language pack is installed with the course."""
    mod = course_language
    base = json.loads((DEPLOY / "jupyter" / "lab-overrides.json").read_text())
    tw = mod.lab_overrides(base, "zh-TW")
    assert tw["@jupyterlab/translation-extension:plugin"] == {"locale": "zh_TW"}
    assert mod.language("zh_tw") == "zh-TW"
    import importlib.util
    spec = importlib.util.find_spec("jupyterlab_language_pack_zh_TW")
    assert spec is not None, "jupyterlab-language-pack-zh-TW is not installed: `bash scripts/setup.sh`"
    assert (Path(spec.origin).parent / "locale" / "zh_TW").is_dir()
    assert '"jupyterlab-language-pack-zh-TW' in (REPO / "pyproject.toml").read_text()
    env = dict(os.environ, COURSE_LANGUAGE="zh-TW")
    out = subprocess.run([sys.executable, "-I", str(DEPLOY / "course_language.py"), "overrides"],
                         capture_output=True, text=True, check=True, env=env).stdout
    assert json.loads(out) == tw
    assert mod.lessons_dir("zh-TW") == REPO / "zh-TW" / "notebooks"
    assert mod.solutions_dir("zh-TW") == REPO / "zh-TW" / "solutions"
    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    (repo / "notebooks" / "03_b.ipynb").write_text("{}")
    with pytest.raises(SystemExit, match=r"zh-TW/notebooks: lessons missing \(03_b.ipynb\).*scripts/i18n.py build"):
        mod.lessons_dir("zh-TW", repo)


def test_the_class_environment_gets_every_package_the_project_installs():
    """deploy/install.sh builds the class's environment from a copy of the checkout: every package
    pyproject.toml installs (course_tools included, which make_course.py and the lesson list
    import) must be in that copy and in the stamp that reinstalls it when its code changes."""
    import tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    packages = [p.rstrip("*") for p in config["tool"]["setuptools"]["packages"]["find"]["include"]]
    assert "course_tools" in packages
    script = (REPO / "deploy" / "install.sh").read_text(encoding="utf-8")
    copy_line = next(line for line in script.splitlines() if line.strip().startswith("cp -r pyproject.toml"))
    stamp_line = next(line for line in script.splitlines() if line.startswith("CODE_STAMP="))
    for package in packages:
        assert f" {package} " in copy_line, f"install.sh's build copy leaves out {package}: {copy_line.strip()}"
        assert f" {package} " in stamp_line, f"install.sh's code stamp leaves out {package}: {stamp_line}"
