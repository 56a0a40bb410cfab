from history import T0, day_of_history
from storage import Store

from agent.cli.plot import render


def test_plot_of_a_day_with_an_off_period_an_alert_and_a_version_change(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path / 'h.db'}", clock=lambda: T0 + 86400, backfill=True)
    day_of_history(store)
    history = store.history(T0, T0 + 86400)
    store.close()
    assert history.off and history.alerts and history.target_versions  # everything to mark is there
    path = render(history, tmp_path / "acceptance.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_plot_of_nothing_says_so(tmp_path):
    store = Store.open(f"sqlite:///{tmp_path / 'h.db'}", clock=lambda: T0)
    path = render(store.history(T0 - 3600, T0), tmp_path / "empty.png")
    store.close()
    assert path.read_bytes()[:4] == b"\x89PNG"
