"""`roboscale report` on a results folder received from someone else (#23 item 6): a
`report.html` or `summary.md` planted as a link is replaced, never written through."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.cli import main

from .test_report import make_run


def test_report_on_a_folder_whose_report_is_a_symlink_leaves_the_target_untouched(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "received"
    make_run(run_dir, backends=("zenoh",))
    victims = {name: tmp_path / f"victim-{name}" for name in ("report.html", "summary.md")}
    for name, victim in victims.items():
        victim.write_text("ssh-ed25519 AAAA... the user's own key\n")
        (run_dir / name).symlink_to(victim)
    with pytest.raises(SystemExit) as done:
        main(["report", str(run_dir)])
    assert done.value.code == 0
    for name, victim in victims.items():
        assert victim.read_text() == "ssh-ed25519 AAAA... the user's own key\n"
        written = run_dir / name
        assert not written.is_symlink() and written.stat().st_size > 0
