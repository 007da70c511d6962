"""Where the kit's folders are when PGLAB_*_DIR variables name them: relative ones from the project root (the
notebooks' kernels run in notebooks/, the command line anywhere), normalised; an empty one counts as unset."""

from conftest import ROOT

from pglab.core import paths


def test_folders_named_by_the_environment(monkeypatch):
    monkeypatch.setenv("PGLAB_STATE_DIR", "build/x/../state")
    monkeypatch.setenv("PGLAB_DATA_DIR", "")
    monkeypatch.setenv("PGLAB_CACHE_DIR", "~nosuchuser-pglab/cache")
    monkeypatch.setenv("PGLAB_MACHINE_STATE_DIR", "/var/tmp/./pglab")
    monkeypatch.chdir(ROOT / "notebooks")
    assert paths.state_dir() == ROOT / "build" / "state"
    assert paths.data_dir() == ROOT / "data"
    assert paths.install_cache_dir() == ROOT / "~nosuchuser-pglab" / "cache"
    assert paths.machine_state_dir().as_posix() == "/var/tmp/pglab"
    monkeypatch.setenv("PGLAB_DATA_DIR", "~/d")
    assert paths.data_dir() == paths.Path.home() / "d"
