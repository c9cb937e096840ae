"""The GitHub Action and `init`'s workflows, run off GitHub: the comment logic against a
loopback REST API, the action's steps in a simulated job (GITHUB_* variables, an event file,
GITHUB_OUTPUT), and the pull-request and release workflows in sequence on a local repository.
Every workflow and action file is valid against GitHub's own schemas."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fake_github import FakeGitHub
from github_sim import Job, git, run_job
from paths import ROOT

from callgate.cli import github
from callgate.cli.workflows import PLACEHOLDER_ACTION, action_ref, workflows


def check_jsonschema(*args: str) -> subprocess.CompletedProcess[str]:
    """The check-jsonschema command, run in this process (its start, a second of CPU, was most
    of what each check cost); its exit code and output as a finished process gives them."""
    from check_jsonschema.cli.main_command import main
    from click.testing import CliRunner

    done = CliRunner().invoke(main, list(args))
    return subprocess.CompletedProcess(["check-jsonschema", *args], done.exit_code, done.output,
                                       "")


REGRESSED = ("### callgate: gate FAIL: regression: my-agent r2 on starter\n\n"
             "- right tool fell 20.0 points\n\n**Passed in r1, fail now (2)**\n\n"
             "- `weather-paris`: wrong_value city\n- `flight-bos-ord`: wrong_tool\n")


@pytest.fixture
def api() -> Iterator[FakeGitHub]:
    fake = FakeGitHub(read_only={"fork-token"}).start()
    yield fake
    fake.stop()


def pr_env(tmp_path: Path, api: FakeGitHub, token: str = "write-token",
           event: str = "pull_request") -> dict[str, str]:
    (tmp_path / "event.json").write_text(json.dumps({"number": 7, "pull_request": {
        "number": 7, "head": {"sha": "a" * 40}}}))
    for name in ("out", "summary"):
        (tmp_path / name).write_text("")
    return {"GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
            "GITHUB_REPOSITORY": api.repository, "GITHUB_API_URL": api.url,
            "GITHUB_TOKEN": token, "GITHUB_OUTPUT": str(tmp_path / "out"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}


def test_first_run_creates_the_comment_the_second_updates_the_same_one(
        tmp_path: Path, api: FakeGitHub) -> None:
    env = pr_env(tmp_path, api)
    summary = tmp_path / "summary.md"
    summary.write_text("### callgate: gate PASS: my-agent r1 on starter\n")
    said: list[str] = []
    api.comments[7] = [{"id": 5, "body": "someone else's comment"}]
    first = github.publish(summary, None, 0, "", True, env, said.append)
    assert first["comment"] == "created" and first["outcome"] == "pass"
    summary.write_text(REGRESSED)
    second = github.publish(summary, None, 1, "", True, env, said.append)
    assert second["comment"] == "updated"
    ours = [c for c in api.comments[7] if github.MARKER in c["body"]]
    assert len(ours) == 1 and len(api.comments[7]) == 2
    body = ours[0]["body"]
    assert "FAIL: regression" in body and "gate PASS" not in body
    # The figures in sight, the flipped cases folded.
    assert "<details><summary>Passed in r1, fail now (2)</summary>" in body
    assert body.index("right tool fell") < body.index("<details>") < body.index("weather-paris")
    assert "Exit code 1 (regression)" in body
    assert [m for m, _, _ in api.requests] == ["GET", "POST", "GET", "PATCH"]
    # Step outputs and the job summary, both runs.
    assert "outcome=regression\nexit-code=1\n" in (tmp_path / "out").read_text()
    assert (tmp_path / "summary").read_text().count("### callgate") == 2
    assert all("write-token" not in line for line in said)


def test_two_gates_on_one_pull_request_keep_two_comments(tmp_path: Path,
                                                         api: FakeGitHub) -> None:
    env = pr_env(tmp_path, api)
    summary = tmp_path / "summary.md"
    summary.write_text("### callgate: gate PASS\n")
    for key in ("agent-a", "agent-b", "agent-a"):
        github.publish(summary, None, 0, key, True, env, lambda _: None)
    assert len(api.comments[7]) == 2


def test_the_comment_is_found_on_a_later_page(tmp_path: Path, api: FakeGitHub) -> None:
    env = pr_env(tmp_path, api)
    api.comments[7] = [{"id": i, "body": "chatter"} for i in range(150)]
    api.comments[7].append({"id": 999, "body": f"{github.marker('')}\nold"})
    summary = tmp_path / "summary.md"
    summary.write_text("### callgate: gate PASS\n")
    assert github.publish(summary, None, 0, "", True, env, lambda _: None)["comment"] == \
        "updated"
    assert api.comments[7][-1]["body"].endswith("(pass).</sub>\n")


def test_a_forks_read_only_token_skips_the_comment_with_a_notice(tmp_path: Path,
                                                                 api: FakeGitHub) -> None:
    env = pr_env(tmp_path, api, token="fork-token")
    summary = tmp_path / "summary.md"
    summary.write_text(REGRESSED)
    said: list[str] = []
    outputs = github.publish(summary, None, 1, "", True, env, said.append)
    assert outputs["comment"] == "skipped" and outputs["exit-code"] == "1"
    assert said[0].startswith("::notice::") and "read-only" in said[0]
    assert 7 not in api.comments
    assert ("POST", "/repos/acme/agent/issues/7/comments", "fork-token") in api.requests


def test_an_api_that_is_down_warns_and_a_push_has_no_comment(tmp_path: Path,
                                                             api: FakeGitHub) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("### callgate: gate PASS\n")
    said: list[str] = []
    env = {**pr_env(tmp_path, api), "GITHUB_API_URL": "http://127.0.0.1:9"}
    assert github.publish(summary, None, 0, "", True, env, said.append)["comment"] == "failed"
    assert said[-1].startswith("::warning::")
    env = {**pr_env(tmp_path, api), "GITHUB_EVENT_NAME": "push"}
    assert github.publish(summary, None, 0, "", True, env, said.append)["comment"] == "skipped"
    assert not api.requests


def test_the_outputs_carry_the_three_figures(tmp_path: Path) -> None:
    scores = tmp_path / "scores.json"
    scores.write_text(json.dumps({"figures": {"right_tool": {"pct": 80.0},
                                              "right_arguments": {"pct": 60.0},
                                              "calls_per_task": 1.25}}))
    (tmp_path / "out").write_text("")
    outputs = github.publish(tmp_path / "missing.md", scores, 3, "", False,
                             {"GITHUB_OUTPUT": str(tmp_path / "out")}, lambda _: None)
    assert outputs == {"outcome": "inconclusive", "exit-code": "3", "right-tool": "80.0",
                       "right-arguments": "60.0", "calls-per-task": "1.2"}


def test_init_fills_in_the_action_it_was_installed_from() -> None:
    assert action_ref("git+https://github.com/acme/callgate@" + "0a" * 20) == \
        "acme/callgate@" + "0a" * 20
    assert action_ref("git+https://github.com/acme/callgate.git@abc") == "acme/callgate@abc"
    for source in ("git+https://gitlab.com/acme/callgate@abc", "git+https://github.com/x@abc",
                   "git+https://github.com/OWNER/callgate@COMMIT"):
        assert action_ref(source) in (PLACEHOLDER_ACTION, "OWNER/callgate@COMMIT")
    made = workflows("acme/callgate@abc", "suite", "r.jsonl")
    assert "uses: acme/callgate@abc\n" in made[".github/workflows/callgate.yml"]
    assert "uses: acme/callgate/install@abc\n" in made[".github/workflows/callgate-sharded.yml"]


# ------------------------------------------------------------------ GitHub's own schemas


def shown_workflows() -> list[tuple[str, str]]:
    """Every workflow callgate writes (init) or shows (README and the site's pages)."""
    found = [(name, text) for name, text in workflows(PLACEHOLDER_ACTION, "suite",
                                                      "r.jsonl").items()]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for index, block in enumerate(re.findall(r"^```ya?ml\n(.*?)^```", page.read_text(),
                                                 flags=re.M | re.S)):
            if "jobs:" in block:
                found.append((f"{page.relative_to(ROOT)}#{index}", block))
    return found


def test_every_workflow_and_action_is_valid_against_githubs_schemas(tmp_path: Path) -> None:
    shown = shown_workflows()
    assert len(shown) >= 5  # init's three, the README's, the CI guide's
    files = []
    for index, (name, text) in enumerate(shown):
        assert "jobs" in yaml.safe_load(text), name
        files.append(tmp_path / f"{index}.yml")
        files[-1].write_text(text)
    done = check_jsonschema("--builtin-schema", "vendor.github-workflows", *map(str, files))
    assert done.returncode == 0, done.stdout + done.stderr
    actions = check_jsonschema("--builtin-schema", "vendor.github-actions",
                               str(ROOT / "action.yml"), str(ROOT / "install/action.yml"))
    assert actions.returncode == 0, actions.stdout + actions.stderr
    # And the check can fail: a step with neither run nor uses is refused.
    files[0].write_text(shown[0][1].replace("      - uses: actions/checkout@v4\n",
                                            "      - name: nothing\n", 1))
    refused = check_jsonschema("--builtin-schema", "vendor.github-workflows", str(files[0]))
    assert refused.returncode == 1


def test_the_ci_guides_gitlab_pipeline_is_valid_against_gitlabs_schema(tmp_path: Path) -> None:
    guide = (ROOT / "docs/guides/ci.md").read_text()
    blocks = [b for b in re.findall(r"^```yaml\n(.*?)^```", guide, flags=re.M | re.S)
              if b.startswith("# .gitlab-ci.yml")]
    assert len(blocks) == 1
    pipeline = yaml.safe_load(blocks[0])
    assert pipeline["release"]["resource_group"] and "--scores-out" not in str(pipeline["gate"])
    assert "--constraint" in str(pipeline["default"]["before_script"])
    (tmp_path / ".gitlab-ci.yml").write_text(blocks[0])
    pipeline_file = str(tmp_path / ".gitlab-ci.yml")
    done = check_jsonschema("--builtin-schema", "vendor.gitlab-ci", pipeline_file)
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / ".gitlab-ci.yml").write_text(blocks[0].replace("when: always",
                                                               "when: sometimes"))
    assert check_jsonschema("--builtin-schema", "vendor.gitlab-ci",
                            str(tmp_path / ".gitlab-ci.yml")).returncode == 1


def test_both_actions_install_with_the_same_locked_script() -> None:
    def script(path: Path) -> str:
        steps = yaml.safe_load(path.read_text())["runs"]["steps"]
        return next(s["run"] for s in steps if s.get("name") == "Install callgate from its lock")

    main, install = script(ROOT / "action.yml"), script(ROOT / "install/action.yml")
    assert main == install
    assert "uv export" in main and "--frozen" in main and "--constraint" in main
    assert "pip install \"$CALLGATE" not in main


# ------------------------------------------------------------------ simulated GitHub


RESPONSES = "responses/first.jsonl"


def answer(workdir: Path, case_id: str, **arguments: str) -> None:
    """Rewrite the recorded answer of one case: its first call's arguments."""
    path = workdir / RESPONSES
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        if line["case_id"] == case_id:
            call = line["response"]["choices"][0]["message"]["tool_calls"][0]["function"]
            call["arguments"] = json.dumps({**json.loads(call["arguments"]), **arguments})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def commit(workdir: Path, message: str) -> str:
    git("add", "-A", cwd=workdir)
    git("commit", "-q", "-m", message, cwd=workdir)
    return git("rev-parse", "HEAD", cwd=workdir)


def branch(work: Path, name: str, start: str, change: dict[str, dict[str, str]]) -> str:
    """A pull request's branch from `start`, pushed; returns its head commit."""
    git("checkout", "-q", "-B", name, start, cwd=work)
    for case_id, arguments in change.items():
        answer(work, case_id, **arguments)
    work.joinpath("NOTES.md").write_text(f"branch {name}\n")  # a change that scores nothing
    head = commit(work, f"{name}: {change}")
    git("push", "-q", "-f", "origin", name, cwd=work)
    return head


class Repo:
    """`callgate init`'s project as a repository: a bare "remote", a work clone, and the jobs
    GitHub would run on it, each in a fresh workspace (an ephemeral runner)."""

    def __init__(self, tmp_path: Path, api: FakeGitHub) -> None:
        callgate = str(Path(sys.executable).with_name("callgate"))
        subprocess.run([callgate, "init", "work"], cwd=tmp_path, check=True,
                       capture_output=True)
        self.tmp, self.work = tmp_path, tmp_path / "work"
        answer(self.work, "weather-paris", city="Lyon")  # right arguments 80%: room to rise
        git("init", "-q", "-b", "main", cwd=self.work)
        git("config", "user.email", "t@example.com", cwd=self.work)
        git("config", "user.name", "t", cwd=self.work)
        self.base = commit(self.work, "init")
        self.remote = tmp_path / "remote.git"
        git("clone", "-q", "--bare", str(self.work), str(self.remote), cwd=tmp_path)
        git("remote", "add", "origin", f"file://{self.remote}", cwd=self.work)
        self.env = {"GITHUB_API_URL": api.url, "GITHUB_REPOSITORY": api.repository,
                    "GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "42"}
        self.jobs = 0

    def workflow(self, name: str) -> Path:
        return self.work / ".github/workflows" / name

    def job(self, event_name: str, event: dict, sha: str, ref: str) -> Job:
        self.jobs += 1
        return Job(workspace=self.tmp / f"job{self.jobs}", remote=self.remote,
                   event_name=event_name, event=event, sha=sha, ref=ref, env=self.env)

    def pull_request(self, number: int, head: str, token: str = "write-token") -> Job:
        event = {"number": number, "pull_request": {
            "number": number, "head": {"sha": head}, "base": {"ref": "main"}}}
        merge = f"{number:040x}"  # github.sha on pull_request: refs/pull/N/merge, not tested
        job = self.job("pull_request", event, merge, f"refs/pull/{number}/merge")
        return run_job(self.workflow("callgate.yml"), job, token)

    def push(self, sha: str) -> Job:
        job = self.job("push", {"after": sha}, sha, "refs/heads/main")
        return run_job(self.workflow("callgate-release.yml"), job, "write-token")

    def main(self) -> str:
        git("fetch", "-q", "origin", cwd=self.work)
        return git("rev-parse", "origin/main", cwd=self.work)

    def releases_on_main(self) -> list[str]:
        listed = git("ls-tree", "--name-only", "main", "releases/", cwd=self.remote)
        return sorted(Path(name).stem for name in listed.split() if name.endswith(".json"))


def decided(job: Job) -> dict:
    """The tested release's scores file the action wrote (in RUNNER_TEMP on a pull request)."""
    return json.loads((job.temp / "callgate/scores.json").read_text())


@pytest.fixture
def repo(tmp_path: Path, api: FakeGitHub) -> Repo:
    return Repo(tmp_path, api)


@pytest.mark.slow
def test_the_action_run_in_a_simulated_github_job(repo: Repo, api: FakeGitHub) -> None:
    """init's workflows, steps run as GitHub runs them: the first run creates the comment, the
    second updates the same one, exit codes pass through, a fork's token skips the comment."""
    released = repo.push(repo.base)
    assert released.status == "success", "\n".join(released.log)
    assert repo.releases_on_main() == [repo.base]
    assert not api.requests  # no comment from a push

    head = branch(repo.work, "fix", repo.main(), {"weather-paris": {"city": "Paris"}})
    first = repo.pull_request(1, head)
    assert first.status == "success", "\n".join(first.log)
    assert "gate PASS" in first.summary and f" {head} on starter" in first.summary
    assert len(api.comments[1]) == 1 and head in api.comments[1][0]["body"]

    head = branch(repo.work, "fix", head, {"weather-nyc": {"city": "NYC"}})
    second = repo.pull_request(1, head)
    assert second.status == "success", "\n".join(second.log)
    assert len(api.comments[1]) == 1 and head in api.comments[1][0]["body"]  # updated
    assert [m for m, *_ in api.requests].count("POST") == 1
    assert "actions/upload-artifact@v4" in second.skipped_actions

    # A fork's pull request that regresses: exit 1 through the job; the comment skipped.
    head = branch(repo.work, "fork", repo.main(), {"flight-bos-ord": {"date": "2026-12-06"}})
    fork = repo.pull_request(2, head, token="fork-token")
    assert fork.status == "failure"
    log = "\n".join(fork.log)
    assert "::notice::callgate: the token cannot write" in log
    assert "[exit 1]" in log.rsplit("$ The gate's exit code", 1)[1]
    assert 2 not in api.comments and "FAIL: regression" in fork.summary
    assert "fork-token" not in log and "write-token" not in log


@pytest.mark.slow
def test_two_pull_requests_one_merged_the_other_gated_again(repo: Repo,
                                                            api: FakeGitHub) -> None:
    """Two pull requests from one base each pass against it; one is merged and released
    (its scores committed to releases/ on main); the other, gated again, now meets the new
    release. Labels are the tested commits; nothing is committed from a pull request."""
    assert repo.push(repo.base).status == "success"
    start = repo.main()  # main after the release workflow recorded the first release
    head_a = branch(repo.work, "a", start, {"weather-paris": {"city": "Paris"}})  # 100%
    head_b = branch(repo.work, "b", start, {})  # still 80%
    gate_a, gate_b = repo.pull_request(1, head_a), repo.pull_request(2, head_b)
    for job, head in ((gate_a, head_a), (gate_b, head_b)):
        assert job.status == "success", "\n".join(job.log)
        scores = decided(job)
        assert scores["release"] == head != job.sha  # the head commit, not the merge commit
        assert scores["gate"]["baseline_release"] == repo.base

    git("checkout", "-q", "-B", "main", start, cwd=repo.work)
    git("merge", "-q", "--no-ff", "a", "-m", "merge a", cwd=repo.work)
    merged = git("rev-parse", "HEAD", cwd=repo.work)
    git("push", "-q", "origin", "main", cwd=repo.work)
    release = repo.push(merged)
    assert release.status == "success", "\n".join(release.log)
    assert repo.releases_on_main() == sorted([repo.base, merged])
    kept = json.loads(git("show", f"main:releases/{merged}.json", cwd=repo.remote))
    assert kept["release"] == merged and kept["gate"]["baseline_release"] == repo.base
    assert kept["figures"]["right_arguments"]["pct"] == 100.0

    again = repo.pull_request(2, head_b)
    assert again.status == "failure"  # 80% now meets the 100% release: a regression
    scores = decided(again)
    assert scores["release"] == head_b and scores["gate"]["baseline_release"] == merged
    assert len(api.comments[2]) == 1 and "FAIL" in api.comments[2][0]["body"]

    # Nothing from a pull request was committed anywhere: a and b hold no scores file, and
    # main holds only the two releases the release workflow recorded.
    for name in ("a", "b"):
        listed = git("ls-tree", "--name-only", name, "releases/", cwd=repo.remote).split()
        assert [n for n in listed if n.endswith(".json")] == [f"releases/{repo.base}.json"]
    for job in (gate_a, gate_b, again):
        assert not git("status", "--porcelain", "releases/", cwd=job.workspace), job.workspace


@pytest.mark.slow
def test_the_install_step_installs_every_dependency_at_the_locked_version(
        tmp_path: Path) -> None:
    """The action's install script, run by bash as the runner would (offline, from uv's
    cache): callgate from the action's checkout, litellm, jsonschema and the rest at the
    versions uv.lock pins."""
    import shutil
    import tomllib

    outside = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                              if Path(p) != Path(sys.executable).parent)  # not this venv's
    found = subprocess.run([shutil.which("python3", path=outside) or "python3", "-c",
                            "import sys, uv; print(sys.executable)"],
                           capture_output=True, text=True)
    if found.returncode != 0 or shutil.which("uv") is None:
        pytest.skip("needs a python3 with uv installed (as .ci/run installs it)")
    bin_dir = tmp_path / "python-bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(found.stdout.strip())
    steps = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]
    script = next(s["run"] for s in steps if s.get("id") == "install")
    env = {"PATH": f"{bin_dir}:{Path(shutil.which('uv') or '').parent}:/usr/bin:/bin",
           "HOME": str(tmp_path), "UV_CACHE_DIR": subprocess.run(
               ["uv", "cache", "dir"], capture_output=True, text=True).stdout.strip(),
           "UV_OFFLINE": "1", "PIP_NO_INDEX": "1", "UV_TOOL_DIR": str(tmp_path / "tools"),
           "UV_TOOL_BIN_DIR": str(tmp_path / "bin"), "RUNNER_TEMP": str(tmp_path),
           "CALLGATE_ROOT": str(ROOT), "CALLGATE_WHEEL": ""}
    def install(**changes: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               script], env={**env, **changes}, capture_output=True, text=True,
                              timeout=600)

    done = install()
    if done.returncode != 0 and _not_in_cache(done.stderr):
        # uv sync reads the lock's wheel URLs, so the index pages the resolver wants offline
        # may never have been cached: ask the registry, as a runner does.
        reach = {name: os.environ[name] for name in (
            "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY",
            "https_proxy", "http_proxy", "no_proxy", "UV_INDEX_URL", "UV_DEFAULT_INDEX",
            "UV_NATIVE_TLS") if name in os.environ}
        done = install(UV_OFFLINE="0", **reach)
        if done.returncode != 0 and _no_network(done.stderr):
            pytest.skip(f"a locked package is not in uv's cache and the registry is not "
                        f"reachable: {done.stderr[-300:]}")
    assert done.returncode == 0, done.stderr
    version = subprocess.run([str(tmp_path / "bin/callgate"), "--version"],
                             capture_output=True, text=True)
    assert version.stdout.startswith("callgate ")
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    locked = {p["name"]: p["version"] for p in lock["package"] if "version" in p}
    constraints = (tmp_path / "callgate-constraints.txt").read_text()
    for name in ("litellm", "jsonschema", "pydantic", "typer"):
        assert f"\n{name}=={locked[name]}\n" in f"\n{constraints}", name
    python = next((tmp_path / "tools/callgate/bin").glob("python"))
    listed = subprocess.run([str(python), "-c", (
        "import importlib.metadata as m; "
        "print(m.version('litellm'), m.version('jsonschema'), m.version('pydantic'))")],
        capture_output=True, text=True)
    assert listed.stdout.split() == [locked["litellm"], locked["jsonschema"],
                                     locked["pydantic"]], listed.stderr


def test_ci_comment_refuses_a_scores_file_that_is_not_json_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from callgate.cli import app

    (tmp_path / "summary.md").write_text("### callgate: gate PASS\n")
    (tmp_path / "scores.json").write_text("{bad")
    (tmp_path / "out").write_text("")
    done = CliRunner().invoke(app, ["ci", "comment", "--summary", str(tmp_path / "summary.md"),
                                    "--exit-code", "0", "--scores",
                                    str(tmp_path / "scores.json"), "--no-comment"],
                              env={"GITHUB_OUTPUT": str(tmp_path / "out")})
    assert done.exit_code == 2
    assert done.output.strip().startswith("error: ")
    assert f"{tmp_path / 'scores.json'}:1: not JSON" in done.output
    assert len(done.output.strip().splitlines()) == 1
    assert (tmp_path / "out").read_text() == ""  # nothing half-written


def _not_in_cache(stderr: str) -> bool:
    text = stderr.lower()
    return "offline" in text or "network was disabled" in text or "not found in the cache" in text


def _no_network(stderr: str) -> bool:
    text = stderr.lower()
    return any(word in text for word in ("failed to fetch", "dns error", "connection refused",
                                         "network is unreachable", "timed out", "offline"))
