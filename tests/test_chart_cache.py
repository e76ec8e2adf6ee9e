"""`make charts`: each chart a stack installs is pulled once from a Helm repository (a real one over HTTP on this
host, tests/chart_repo.py), verified against the sha256 its index publishes, recorded in the lock, and then
installed from the cache without any network; once locked, a chart that changed upstream is refused."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from chart_repo import FakeRepository, chart_archive, closed_port_url, sha256

from gpu_tenancy.cli.charts import command as charts_cli
from gpu_tenancy.cli.charts.pull import pull
from gpu_tenancy.contract import chart_lock
from gpu_tenancy.contract.chart_lock import ChartCacheError, ChartRef

REPO = Path(__file__).resolve().parents[1]
NOW = datetime.datetime(2026, 12, 6, 6, 0, 0, tzinfo=datetime.UTC)


def _ref(repo: str, name: str = "kamaji", version: str = "0.0.0+latest") -> ChartRef:
    return ChartRef(name=name, version=version, repo=repo)


def _lock(root: Path) -> list[dict[str, object]]:
    charts: list[dict[str, object]] = json.loads((root / ".charts" / "lock.json").read_text())["charts"]
    return charts


def test_a_first_pull_verifies_stores_and_records_the_chart(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    data = chart_archive("kamaji", "0.0.0+latest", app_version="latest", dependencies=("kamaji-etcd",))
    digest = repository.publish("kamaji", "0.0.0+latest", data, created="2026-12-05T21:13:00Z")
    root = tmp_path / "project"
    with repository.serving() as url:
        done, problems = pull(root, [_ref(url)], stack="dev", now=lambda: NOW)
    assert problems == []
    assert done == [f"charts: kamaji 0.0.0+latest sha256 {digest[:12]} pulled from {url}/kamaji-0.0.0+latest.tgz"]
    stored = root / ".charts" / f"sha256-{digest}" / "kamaji-0.0.0+latest.tgz"
    assert stored.read_bytes() == data
    assert _lock(root) == [{
        "name": "kamaji", "version": "0.0.0+latest", "repo": url, "url": f"{url}/kamaji-0.0.0+latest.tgz",
        "sha256": digest, "appVersion": "latest", "published": "2026-12-05T21:13:00Z",
        "pulledAt": "2026-12-06T06:00:00+00:00",
    }]
    assert repository.requests == ["/charts/index.yaml", "/charts/kamaji-0.0.0+latest.tgz"]
    # What the program then installs: the archive's path relative to the project directory.
    assert chart_lock.cached_chart(_ref(url), "dev", root) == f".charts/sha256-{digest}/kamaji-0.0.0+latest.tgz"


def test_a_second_pull_and_the_program_need_no_network(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    digest = repository.publish("hami", "2.10.0", chart_archive("hami", "2.10.0"))
    root = tmp_path / "project"
    with repository.serving() as url:
        pull(root, [_ref(url, "hami", "2.10.0")], stack="dev")
    # The repository is gone: a lock naming a port nothing listens on, every fetch would fail.
    offline = closed_port_url()
    lock = (root / ".charts" / "lock.json").read_text().replace(url, offline)
    (root / ".charts" / "lock.json").write_text(lock)

    def no_network(target: str) -> bytes:
        raise AssertionError(f"fetched {target}")

    done, problems = pull(root, [_ref(offline, "hami", "2.10.0")], stack="dev", fetch=no_network)
    assert (done, problems) == ([f"charts: hami 2.10.0 sha256 {digest[:12]} (cached, nothing fetched)"], [])
    assert chart_lock.cached_chart(_ref(offline, "hami", "2.10.0"), "dev", root).endswith(f"{digest}/hami-2.10.0.tgz")
    # and with the real fetcher, against the closed port: still nothing fetched, nothing fails
    assert pull(root, [_ref(offline, "hami", "2.10.0")], stack="dev")[1] == []


def test_a_download_whose_digest_differs_from_the_index_is_refused_and_nothing_kept(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    data = chart_archive("hami", "2.10.0")
    repository.publish("hami", "2.10.0", data, digest="0" * 64)
    root = tmp_path / "project"
    with repository.serving() as url:
        done, (problem,) = pull(root, [_ref(url, "hami", "2.10.0")], stack="dev")
    assert done == []
    assert problem == (f"problem: charts: chart hami 2.10.0 from {url}: the download has sha256 {sha256(data)}, the "
                       f"repository's index says {'0' * 64}; refused (nothing was kept)")
    assert not (root / ".charts").exists() or list((root / ".charts").rglob("*.tgz")) == []


@pytest.mark.parametrize(("archive", "digest", "expected"), [
    (chart_archive("hami", "2.9.0"), None, "the archive holds chart hami 2.9.0; refused"),
    (chart_archive("hami", "2.10.0", chart_name="hami-fork"), None, "the archive holds chart hami-fork 2.10.0"),
    (chart_archive("hami", "2.10.0"), "", "the repository's index publishes no sha256 digest for it"),
    (chart_archive("hami", "2.10.0"), "md5:0123", "publishes no sha256 digest for it ('md5:0123')"),
    (b"not a tarball", None, "the archive has no readable hami/Chart.yaml"),
])
def test_an_archive_that_is_not_the_pinned_chart_is_refused(
    tmp_path: Path, archive: bytes, digest: str | None, expected: str
) -> None:
    repository = FakeRepository(tmp_path / "repo")
    repository.publish("hami", "2.10.0", archive, digest=digest)
    with repository.serving() as url:
        done, (problem,) = pull(tmp_path / "project", [_ref(url, "hami", "2.10.0")], stack="dev")
    assert done == [] and expected in problem


def test_a_dependency_that_is_not_packaged_is_refused(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    data = chart_archive("kamaji", "0.0.0+latest", dependencies=("kamaji-etcd",), packaged=False)
    repository.publish("kamaji", "0.0.0+latest", data)
    with repository.serving() as url:
        _, (problem,) = pull(tmp_path / "project", [_ref(url)], stack="dev")
    assert "its dependency kamaji-etcd is not packaged in the archive" in problem


def test_a_version_the_repository_does_not_publish_is_refused(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    repository.publish("hami", "2.10.0", chart_archive("hami", "2.10.0"))
    with repository.serving() as url:
        _, (problem,) = pull(tmp_path / "project", [_ref(url, "hami", "2.10.1")], stack="dev")
    assert "the repository does not publish this version (newest listed: 2.10.0)" in problem


def test_a_moving_chart_changed_upstream_is_refused_with_the_relock_command(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    first = chart_archive("kamaji", "0.0.0+latest", templates="a: 1")
    old = repository.publish("kamaji", "0.0.0+latest", first)
    root = tmp_path / "project"
    with repository.serving() as url:
        pull(root, [_ref(url)], stack="dev")
        # CLASTIX pushes to master: the same version, other content. The cached archive is gone (a new machine
        # with the lock, or a cleaned cache), so the repository is asked again.
        new = repository.publish("kamaji", "0.0.0+latest", chart_archive("kamaji", "0.0.0+latest", templates="b: 2"))
        (root / ".charts" / f"sha256-{old}" / "kamaji-0.0.0+latest.tgz").unlink()
        done, (problem,) = pull(root, [_ref(url)], stack="dev")
        assert done == []
        assert problem.startswith(f"problem: charts: chart kamaji 0.0.0+latest from {url}: the repository now "
                                  f"publishes sha256 {new[:12]}, the lock records {old[:12]} (pulled ")
        assert problem.endswith("To take it deliberately: make charts STACK=dev RELOCK=kamaji")
        assert [c["sha256"] for c in _lock(root)] == [old]  # the lock still decides
        requests_before = len(repository.requests)
        done, problems = pull(root, [_ref(url)], stack="dev", relock={"kamaji"})
    assert problems == [] and done == [
        f"charts: kamaji 0.0.0+latest sha256 {new[:12]} (was {old[:12]}) pulled from {url}/kamaji-0.0.0+latest.tgz"
    ]
    assert repository.requests[requests_before:] == ["/charts/index.yaml", "/charts/kamaji-0.0.0+latest.tgz"]
    assert [c["sha256"] for c in _lock(root)] == [new]


def test_the_cached_archive_unchanged_upstream_is_fetched_again_when_missing(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    digest = repository.publish("hami", "2.10.0", chart_archive("hami", "2.10.0"))
    root = tmp_path / "project"
    with repository.serving() as url:
        pull(root, [_ref(url, "hami", "2.10.0")], stack="dev")
        (root / ".charts" / f"sha256-{digest}" / "hami-2.10.0.tgz").write_bytes(b"tampered")
        with pytest.raises(ChartCacheError, match="does not have the sha256 the lock records; run `make charts "
                                                  "STACK=dev`"):
            chart_lock.cached_chart(_ref(url, "hami", "2.10.0"), "dev", root)
        done, problems = pull(root, [_ref(url, "hami", "2.10.0")], stack="dev")
    assert problems == [] and "pulled from" in done[0]
    assert chart_lock.cached_chart(_ref(url, "hami", "2.10.0"), "dev", root).endswith("hami-2.10.0.tgz")


def test_the_program_refuses_a_chart_the_lock_does_not_record(tmp_path: Path) -> None:
    with pytest.raises(ChartCacheError) as refused:
        chart_lock.cached_chart(_ref("https://clastix.github.io/charts"), "dev", tmp_path)
    assert str(refused.value) == ("chart kamaji 0.0.0+latest from https://clastix.github.io/charts: not in the chart "
                                  "cache (.charts/lock.json); run `make charts STACK=dev` (`make up` runs it)")


@pytest.mark.parametrize(("text", "key"), [
    ('{"charts": [{"name": "hami"}]}', "charts.0.version: Field required"),
    ('{"charts": [], "extra": 1}', "extra: Extra inputs are not permitted"),
    ('{"charts": "hami"}', "charts: Input should be a valid list"),
    ('{"charts": [{"name": "hami", "version": "2.10.0", "repo": "https://x.test", "url": "https://x.test/h.tgz", '
     '"sha256": "abc", "pulledAt": "now"}]}', "charts.0.sha256: String should match pattern"),
    ("{not json", "not valid JSON"),
])
def test_a_bad_lock_file_is_one_line_naming_the_key(tmp_path: Path, text: str, key: str) -> None:
    (tmp_path / ".charts").mkdir()
    (tmp_path / ".charts" / "lock.json").write_text(text)
    with pytest.raises(ChartCacheError) as refused:
        chart_lock.load_lock(tmp_path)
    message = str(refused.value)
    assert "\n" not in message and key in message and "run `make charts`" in message


def test_the_command_pulls_what_the_stack_needs_and_names_problems_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Pulumi.dev.yaml").write_text((REPO / "Pulumi.dev.yaml").read_text())
    assert charts_cli.main(["--stack", "dev", "--root", str(tmp_path), "--relock", "nvidia"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("problem: charts: RELOCK=nvidia names no chart of stack dev (its charts: cert-manager, ")
    (tmp_path / ".charts").mkdir()
    (tmp_path / ".charts" / "lock.json").write_text("[]")
    assert charts_cli.main(["--stack", "dev", "--root", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"problem: charts: {tmp_path}/.charts/lock.json: (top level): Input should be")


def test_a_first_pull_without_the_repository_names_the_url_and_the_fix(tmp_path: Path) -> None:
    offline = closed_port_url()
    done, (problem,) = pull(tmp_path, [_ref(offline, "hami", "2.10.0")], stack="dev")
    assert done == [] and "\n" not in problem
    assert problem.startswith(f"problem: charts: cannot fetch {offline}/index.yaml: ")
    assert problem.endswith("let this host reach it (the proxy variables apply), or copy .charts/ from a checkout "
                            "that has pulled this chart")


def test_a_prefixed_digest_is_read_and_other_charts_entries_are_not(tmp_path: Path) -> None:
    repository = FakeRepository(tmp_path / "repo")
    data = chart_archive("hami", "2.10.0")
    repository.publish("hami", "2.10.0", data, digest=f"sha256:{sha256(data).upper()}")
    repository.entries["other"] = [{"version": "1.0.0"}]  # no urls: not a chart this project pulls
    repository.publish("hami", "2.10.0", data, digest=f"sha256:{sha256(data).upper()}")
    with repository.serving() as url:
        done, problems = pull(tmp_path / "project", [_ref(url, "hami", "2.10.0")], stack="dev")
        assert problems == [] and f"sha256 {sha256(data)[:12]} pulled" in done[0]
        repository.entries["hami"][0].pop("urls")
        repository.publish("kamaji-etcd", "0.15.0", chart_archive("kamaji-etcd", "0.15.0"))
        (tmp_path / "project" / ".charts" / "lock.json").unlink()
        _, (problem,) = pull(tmp_path / "project", [_ref(url, "hami", "2.10.0")], stack="dev")
    assert problem == f"problem: charts: {url}/index.yaml: entries.hami: 0.urls: Field required; refused"


def test_in_ci_the_cache_is_kept_with_the_file_backends_state(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI checkout is cleaned on every run (actions/checkout `clean: true`); the lock must outlive it."""
    project, state = tmp_path / "project", tmp_path / "state"
    project.mkdir()
    (project / "Pulumi.dev.yaml").write_text((REPO / "Pulumi.dev.yaml").read_text())
    repository = FakeRepository(tmp_path / "repo")
    digest = repository.publish("hami", "2.10.0", chart_archive("hami", "2.10.0"))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{state}")
    with repository.serving() as url:
        assert charts_cli.keep_with_backend(project, f"file://{state}") is None
        pull(project, [_ref(url, "hami", "2.10.0")], stack="dev")
    assert (state / "charts" / f"sha256-{digest}" / "hami-2.10.0.tgz").is_file()
    assert (project / ".charts").resolve() == (state / "charts").resolve()
    # the next run's fresh checkout: linked again, the archive and the lock are there, nothing is fetched
    (project / ".charts").unlink()
    assert charts_cli.keep_with_backend(project, f"file://{state}") is None
    assert chart_lock.cached_chart(_ref(url, "hami", "2.10.0"), "dev", project).endswith(f"{digest}/hami-2.10.0.tgz")
    assert charts_cli.keep_with_backend(project, f"file://{state}") is None  # idempotent
    # a real directory in the way: one line
    (project / ".charts").unlink()
    (project / ".charts").mkdir()
    assert charts_cli.main(["--stack", "dev", "--root", str(project), "--keep-with-backend"]) == 1
    assert capsys.readouterr().out.startswith(f"problem: charts: {project}/.charts already exists; remove it")
    # object storage: the runner's own cache directory, kept between runs
    (project / ".charts").rmdir()
    assert charts_cli.keep_with_backend(project, "s3://bucket/state", home=tmp_path / "home") is None
    assert (project / ".charts").resolve() == (tmp_path / "home" / ".cache" / "gpu-tenancy" / "charts").resolve()
