"""The `vigil` command: pending subcommands say which issue brings them; user errors are one line, no traceback."""

import pytest

from vigil_core import cli


def test_pending_subcommand_names_its_issue_and_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    command, issue = "someday", "#99 Someday"  # every subcommand has landed: the mechanism, with one of its own
    monkeypatch.setitem(cli.PENDING, command, ("do it later", issue))
    assert cli.main([command, "--anything"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vigil {command}: not implemented yet")
    assert issue in err
    assert err.count("\n") == 1


def test_dev_status_without_a_stack_says_so(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "status", "--state-dir", str(tmp_path)]) == 1
    assert f"no stack at {tmp_path}" in capsys.readouterr().out


def test_dev_down_without_a_stack_is_harmless(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "down", "--state-dir", str(tmp_path)]) == 0
    assert "nothing running" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["dev", "up", "--brokers", "2"], ["dev", "up", "--security", "kerberos"], []])
def test_bad_arguments_exit_2_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert "usage: vigil" in capsys.readouterr().err
