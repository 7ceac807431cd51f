"""`vigil dev` with Kubernetes parts: what status says about a recorded stack, and user errors in one line."""

from pathlib import Path

import pytest

from vigil_cli import cli
from vigil_dev.kube.controlplane import KubeCluster, KubePorts

PORTS = KubePorts(etcd=1, etcd_peer=2, apiserver=3, controller_manager=4, scheduler=5, kubelet=6, kubelet_healthz=7,
                  proxy_healthz=8, proxy_metrics=9)  # fmt: skip


def test_up_with_nothing_to_start_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dev", "up", "--no-kafka", "--no-kube", "--state-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == "vigil dev up: nothing to start: both Kafka and Kubernetes were left out\n"


def test_status_names_every_kubernetes_part_of_a_stopped_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    KubeCluster(state_dir=tmp_path, version="v1.35.8", ports=PORTS, binaries={}).save()
    assert cli.main(["dev", "status", "--state-dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert names == [
        "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "containerd", "kubelet", "kube-proxy",
    ]  # fmt: skip
    assert all(line.split()[1] == "DOWN" for line in lines)
    assert cli.main(["dev", "down", "--state-dir", str(tmp_path)]) == 0
    assert "nothing running" in capsys.readouterr().out


def test_layout_round_trips(tmp_path: Path) -> None:
    cluster = KubeCluster(tmp_path, "v1.35.8", PORTS, {"etcd": "/bin/etcd"}, "10.78.0.0/16")
    cluster.save()
    assert KubeCluster.load(tmp_path) == cluster
    assert cluster.server == "https://10.78.0.1:3"  # the apiserver is on the node IP: pods reach it there too
    assert cluster.node.layout.network.pod_cidr == "10.78.128.0/24"
    assert KubeCluster.load(tmp_path / "elsewhere") is None


def test_a_layout_an_older_vigil_dev_wrote_is_not_taken_for_ours(tmp_path: Path) -> None:
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "cluster.json").write_text(
        '{"state_dir": "/x", "version": "v1.35.8", "binaries": {}, "nodes": ["node-1"],'
        ' "ports": {"etcd": 1, "etcd_peer": 2, "apiserver": 3, "controller_manager": 4}}'
    )
    assert KubeCluster.load(tmp_path) is None
