"""Reading git repositories through the git CLI: real repositories made in temp dirs."""

import importlib.util
import subprocess

import pytest

from jarvis_core.config import ConfigError, config_from_mapping
from jarvis_core.sources.repo.git import GitError, mirror, open_repository
from jarvis_core.sources.repo.graph import extract_repo_graph
from jarvis_core.sources.repo.knowledge import parse_knowledge
from jarvis_core.sources.repo.sync import StoredRepo, language, matches, sync_repository
from tests.pipeline_helpers import PROJECT_ROOT
from tests.source_helpers import DOCS, Repo


def stored_after(sync) -> StoredRepo:
    """What the tables would hold after writing ``sync`` on top of nothing."""
    return StoredRepo(head=sync.head, settings=sync.settings,
                      shas={c.sha for c in sync.new_commits},
                      docs={d["path"]: d["blob_sha"] for d in sync.docs},
                      knowledge={k["path"]: k["blob_sha"] for k in sync.knowledge})


@pytest.fixture
def repo(tmp_path) -> Repo:
    repo = Repo(tmp_path / "repo")
    repo.commit("Initial commit\n\nREADME and the ingest skeleton (LUM-1).", {
        "README.md": "# Lumen\n\nWeather stations.\n",
        "src/ingest.py": "def ingest():\n    pass\n"})
    repo.commit("[LUM-4] dedupe key", {"src/ingest.py": "def ingest():\n    dedupe()\n    pass\n",
                                       "logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary"},
                who=("dana.kim", "Dana@Lumen.example"))
    return repo


def test_commits_with_numstat_renames_binaries_and_merges(repo):
    repo.git("checkout", "-q", "-b", "feature/LUM-6-alert-rules")
    repo.commit("Alert rules", {"src/rules.py": "RULES = {}\n"},
                who=("Kim, Dana", "dana@lumen.example"))
    repo.git("checkout", "-q", "main")
    repo.git("mv", "src/ingest.py", "src/ingest_api.py")
    repo.commit("Rename the ingest module", {"docs/guide/setup.md": "# Setup\n\nRun it.\n"},
                who=("Omar Haddad", "omar@lumen.example"))
    repo.git("merge", "-q", "--no-ff", "-m", "Merge branch 'feature/LUM-6-alert-rules'",
             "feature/LUM-6-alert-rules")

    sync = repo.sync()
    by_subject = {c.subject: c for c in sync.new_commits}
    assert len(sync.new_commits) == sync.commit_count == 5
    first = by_subject["Initial commit"]
    assert first.parents == [] and first.message.endswith("(LUM-1).")
    assert {f["path"]: (f["additions"], f["deletions"]) for f in first.files} == {
        "README.md": (3, 0), "src/ingest.py": (2, 0)}
    dedupe = by_subject["[LUM-4] dedupe key"]
    assert dedupe.author_name == "dana.kim" and dedupe.author_email == "Dana@Lumen.example"
    assert {f["path"]: f["binary"] for f in dedupe.files} == {"logo.png": True,
                                                              "src/ingest.py": False}
    [renamed] = [f for f in by_subject["Rename the ingest module"].files
                 if f["path"] == "src/ingest_api.py"]
    assert renamed["old_path"] == "src/ingest.py"
    merge = by_subject["Merge branch 'feature/LUM-6-alert-rules'"]
    assert len(merge.parents) == 2 and merge.files == []
    assert sync.head == repo.git("rev-parse", "HEAD") and not sync.shallow

    files = {entry.path for entry in sync.files}
    assert files == {"README.md", "logo.png", "src/ingest_api.py", "src/rules.py",
                     "docs/guide/setup.md"}
    assert {doc["path"]: doc["title"] for doc in sync.docs} == {
        "README.md": "Lumen", "docs/guide/setup.md": "Setup"}


def test_only_new_commits_are_read_and_unchanged_heads_are_skipped(repo):
    first = repo.sync()
    again = repo.sync(stored_after(first))
    assert again.unchanged and again.new_commits == []

    new = repo.commit("LUM-8: downsampling", {"src/query.py": "def downsample(): ...\n"})
    second = repo.sync(stored_after(first))
    assert [c.sha for c in second.new_commits] == [new]
    assert second.removed_shas == [] and not second.rewritten
    assert second.docs == [] and second.unchanged_docs == 1  # README is unchanged


def test_a_force_push_removes_the_rewritten_commits(repo):
    before = repo.sync()
    doomed = repo.git("rev-parse", "HEAD")
    repo.git("reset", "-q", "--hard", "HEAD~1")
    replacement = repo.commit("[LUM-4] dedupe key, done properly", {"src/dedupe.py": "x = 1\n"})
    after = repo.sync(stored_after(before))
    assert after.rewritten
    assert after.removed_shas == [doomed]
    assert [c.sha for c in after.new_commits] == [replacement]


def test_a_shallow_clone_is_ingested_as_far_as_its_history_goes(repo, tmp_path):
    repo.commit("Third", {"src/third.py": "3\n"})
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "2", f"file://{repo.path}", str(shallow)],
                   check=True, capture_output=True)
    sync = sync_repository(shallow, StoredRepo(), branch="HEAD", docs=DOCS,
                           knowledge_dir=".jarvis", exclude=())
    assert sync.shallow and len(sync.new_commits) == 2
    graph = extract_repo_graph("lumen", _commit_rows(sync), _file_rows(sync), [], [], [], [])
    parents = [e for e in graph.edges if e.relation == "PARENT"]
    assert len(parents) == 1  # the boundary commit's parent is not there to link to


def test_a_folder_that_is_no_repository_is_a_clear_error(repo, tmp_path):
    plain = repo.path / "src"  # inside a repository, but not one itself
    with pytest.raises(GitError, match="not a git repository"):
        open_repository(plain)
    with pytest.raises(GitError, match="does not exist"):
        open_repository(tmp_path / "missing")
    with pytest.raises(GitError, match="branch 'nope' does not name a commit"):
        repo.sync(branch="nope")


def test_a_missing_object_fails_the_commit_and_doc_that_need_it_only(repo):
    broken = repo.commit("Docs", {"docs/a.md": "# A\n\nalpha\n", "docs/b.md": "# B\n\nbeta\n"})
    blob = repo.git("rev-parse", "HEAD:docs/a.md")
    (repo.path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    sync = repo.sync()
    failures = {f["path"]: f["reason"] for f in sync.failures}
    assert set(failures) == {f"commits/{broken}", "docs/a.md"}
    assert blob in failures["docs/a.md"] and "missing" in failures["docs/a.md"]
    assert len(sync.new_commits) == 2  # the other commits are read
    assert {d["path"] for d in sync.docs} == {"README.md", "docs/b.md"}


def test_messages_in_other_encodings(repo):
    (repo.path / "msg").write_bytes("Café au lait\n".encode("latin-1"))
    repo.git("-c", "i18n.commitEncoding=ISO-8859-1", "commit", "-q", "--allow-empty",
             "-F", "msg")
    (repo.path / "msg").write_bytes(b"Bad \xff\xfe bytes\n")
    unknown = repo.git("-c", "i18n.commitEncoding=no-such-encoding", "commit", "-q",
                       "--allow-empty", "-F", "msg") or repo.git("rev-parse", "HEAD")
    sync = repo.sync()
    subjects = {c.subject for c in sync.new_commits}
    assert "Café au lait" in subjects  # re-encoded by git from its declared encoding
    assert "Bad \ufffd\ufffd bytes" in subjects
    [warning] = sync.warnings
    assert warning.startswith(f"commits/{unknown}: not valid UTF-8 at byte")


def test_a_url_is_mirrored_then_fetched_following_force_pushes(repo, tmp_path):
    clone = tmp_path / "data" / "repos" / "lumen"
    assert mirror(str(repo.path), clone) == "cloned"
    first = sync_repository(clone, StoredRepo(), branch="HEAD", docs=DOCS,
                            knowledge_dir=".jarvis", exclude=())
    repo.git("reset", "-q", "--hard", "HEAD~1")
    repo.commit("Rewritten", {"src/other.py": "1\n"})
    assert mirror(str(repo.path), clone) == "fetched"
    second = sync_repository(clone, stored_after(first), branch="HEAD", docs=DOCS,
                             knowledge_dir=".jarvis", exclude=())
    assert second.rewritten and [c.subject for c in second.new_commits] == ["Rewritten"]
    with pytest.raises(GitError, match="git clone"):
        mirror(str(tmp_path / "nowhere"), tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_knowledge_yaml_is_parsed_deterministically_and_bad_yaml_is_one_failure(repo):
    repo.commit("Knowledge", {
        ".jarvis/components.yaml": (
            "components:\n"
            "  - name: ingest\n    depends_on: storage\n    owners: [dana@lumen.example]\n"
            "    paths: [src/]\n"
            "  - name: storage\n    relations: [{type: part of, target: ingest}]\n"),
        ".jarvis/broken.yaml": "components: [name: 'unterminated\n"})
    sync = repo.sync()
    assert [f["path"] for f in sync.failures] == [".jarvis/broken.yaml"]
    assert "not valid YAML" in sync.failures[0]["reason"]
    good = {k["path"]: k for k in sync.knowledge}[".jarvis/components.yaml"]
    assert '"relations": [["DEPENDS_ON", "storage"]]' in good["components"]
    assert parse_knowledge("components:\n  - name: b\n  - name: a\n")[0]["name"] == "a"
    with pytest.raises(ValueError, match=r"components\[0\] \(x\): unknown field\(s\) colour"):
        parse_knowledge("components:\n  - name: x\n    colour: red\n")
    with pytest.raises(ValueError, match="must be a mapping with a 'name'"):
        parse_knowledge("components:\n  - description: nameless\n")


def test_languages_and_globs():
    assert language("src/lumen/api.py") == "Python"
    assert language("schema.SQL") is not None
    assert language("Makefile") == "Makefile"
    assert language("notes.unknown-extension") is None
    assert matches("docs/a.md", DOCS) and matches("docs/x/y/a.md", DOCS)
    assert matches("README.rst", DOCS) and not matches("src/README.md", DOCS)


def test_repo_and_ticket_config(tmp_path):
    (tmp_path / "vault").mkdir()
    (tmp_path / "export.json").write_text("{}")
    config = config_from_mapping({
        "vaults": {"notes": "vault"},
        "repos": {"local": str(tmp_path), "remote": {"url": "lumen.bundle", "branch": "main"},
                  "hub": {"url": "git@github.com:acme/lumen.git"}},
        "tickets": {"jira": "export.json"}}, base_dir=tmp_path)
    assert config.source_names == ["hub", "jira", "local", "notes", "remote"]
    assert [config.source_kind(n) for n in ("notes", "local", "jira", "x")] == [
        "vault", "repo", "tickets", None]
    assert config.sources["remote"].url == str(tmp_path / "lumen.bundle")
    assert config.sources["hub"].url == "git@github.com:acme/lumen.git"
    assert config.sources["remote"].checkout(config.data_dir, "remote") == \
        config.data_dir / "repos" / "remote"
    assert config.sources["local"].docs == DOCS
    with pytest.raises(ConfigError, match="'notes' is configured as vault and as repo"):
        config_from_mapping({"vaults": {"notes": "vault"}, "repos": {"notes": str(tmp_path)}},
                            base_dir=tmp_path)
    with pytest.raises(ConfigError, match="repos.r: .*needs a 'path'"):
        config_from_mapping({"repos": {"r": {"branch": "main"}}}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match="repos.r.path: .*is not a directory"):
        config_from_mapping({"repos": {"r": "export.json"}}, base_dir=tmp_path)
    # a missing clone fails that source's runs (open_repository), not the configuration
    missing = config_from_mapping({"repos": {"r": "nowhere"}}, base_dir=tmp_path)
    with pytest.raises(GitError, match="nowhere: repository directory does not exist"):
        open_repository(missing.sources["r"].path)


def _commit_rows(sync) -> list[dict]:
    return [{"sha": c.sha, "parents": c.parents, "author_name": c.author_name,
             "author_email": c.author_email, "authored_at": c.authored_at,
             "committed_at": c.committed_at, "subject": c.subject, "message": c.message,
             "additions": 0, "deletions": 0, "files_changed": len(c.files)}
            for c in sync.new_commits]


def _file_rows(sync) -> list[dict]:
    return [{"sha": c.sha, **f} for c in sync.new_commits for f in c.files]


def test_repo_graph_folds_authors_and_links_commits_files_and_components(repo):
    repo.commit("Components", {".jarvis/components.yaml": (
        "components:\n  - name: ingest\n    owners: [dana@lumen.example]\n    paths: [src/]\n"
        "    depends_on: [storage, ghost]\n  - name: storage\n")})
    sync = repo.sync()
    repo_files = [{"path": e.path, "language": language(e.path)} for e in sync.files]
    graph = extract_repo_graph("lumen", _commit_rows(sync), _file_rows(sync), repo_files,
                               sync.docs, sync.knowledge, [])
    people = [n for n in graph.nodes if n.type == "person"]
    assert [p.key for p in people] == ["person:dana@lumen.example"]  # three spellings, one
    authored = [e for e in graph.edges if e.relation == "AUTHORED"]
    assert len(authored) == 3 and {e.src for e in authored} == {people[0].key}
    modifies = {(e.src.rpartition("/")[2][:7], e.dst, e.evidence_text)
                for e in graph.edges if e.relation == "MODIFIES"}
    assert any(dst == "file:lumen/src/ingest.py" and text == "src/ingest.py +2 -0"
               for _, dst, text in modifies)
    relations = {(e.src, e.relation, e.dst) for e in graph.edges}
    assert ("component:lumen/ingest", "DEPENDS_ON", "component:lumen/storage") in relations
    assert ("person:dana@lumen.example", "OWNS", "component:lumen/ingest") in relations
    assert ("component:lumen/ingest", "CONTAINS", "file:lumen/src/ingest.py") in relations
    assert [b.target for b in graph.broken] == ["ghost"]
    cited = {(r.kind, r.target) for r in graph.references}
    assert {("jira", "LUM-1"), ("jira", "LUM-4")} <= cited
    assert set(graph.fingerprints) == {f"commit:lumen/{c.sha}" for c in sync.new_commits} | {
        "repo_doc:lumen/README.md", "repo_doc:lumen/.jarvis/components.yaml"}


def test_the_sample_bundle_is_what_the_script_builds(tmp_path):
    """Fixed identities and dates: the script rebuilds the shipped bundle's exact history,
    whose commits the vault cites by hash."""
    script = PROJECT_ROOT / "scripts" / "make_sample_repo.py"
    spec = importlib.util.spec_from_file_location("make_sample_repo", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (tmp_path / "lumen").mkdir()
    built = module.build(tmp_path / "lumen")
    bundle = PROJECT_ROOT / "sample_data" / "repos" / "lumen.bundle"
    heads = subprocess.run(["git", "bundle", "list-heads", str(bundle)], check=True,
                           capture_output=True, text=True).stdout
    head = subprocess.run(["git", "-C", str(tmp_path / "lumen"), "rev-parse", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()
    assert f"{head} refs/heads/main" in heads
    assert len(built) == 15 and {"c97437b", "5d24297"} <= {short for short, _ in built}
    cited = (PROJECT_ROOT / "sample_data" / "vault" / "Projects" / "Lumen" / "Architecture"
             / "Ingest API.md").read_text()
    assert "c97437b" in cited and "5d24297" in cited
