"""`vigil dev` with Kubernetes parts: what status says about a recorded stack, and user errors in one line."""

import json
import re
from dataclasses import asdict, replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vigil_cli import cli
from vigil_dev.errors import DevError
from vigil_dev.kafka.cluster import KafkaCluster
from vigil_dev.kafka.config import NodePorts, Security
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


def test_a_layout_that_is_not_json_is_one_line(tmp_path: Path) -> None:
    for part in ("kube", "kafka"):
        (tmp_path / part).mkdir()
        (tmp_path / part / "cluster.json").write_text('{"state_dir": ')
    with pytest.raises(DevError, match=r"kube/cluster\.json: not JSON: EOF while parsing") as info:
        KubeCluster.load(tmp_path)
    assert "\n" not in str(info.value)
    with pytest.raises(DevError, match=r"kafka/cluster\.json: not JSON: EOF while parsing"):
        KafkaCluster.load(tmp_path)


def test_a_broken_kafka_layout_names_the_field(tmp_path: Path) -> None:
    cluster = KafkaCluster(tmp_path, "4.1.1", tmp_path / "libs", "id", Security.PLAINTEXT, (NodePorts(1, 2, 3, 4),), {})
    cluster.save()
    saved = json.loads((tmp_path / "kafka" / "cluster.json").read_text())
    for change, message in [
        ({"security": "kerberos"}, "security must be 'plaintext', 'sasl-scram', 'ssl' or 'sasl-scram-tls', got"),
        ({"nodes": [{"node_id": 1, "client": "2", "controller": 3, "internal": 4}]}, "nodes[0].client must be an"),
        ({"version": None}, "version must be a string, got null"),
    ]:
        (tmp_path / "kafka" / "cluster.json").write_text(json.dumps(saved | change))
        with pytest.raises(DevError, match=re.escape(f"kafka/cluster.json: {message}")):
            KafkaCluster.load(tmp_path)


_paths = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), min_size=1, max_size=20).map(
    lambda s: Path("/" + s)
)
_port = st.integers(1, 65535)
_kafka_layouts = st.builds(
    KafkaCluster,
    state_dir=_paths,
    version=st.text(max_size=10),
    libs=_paths,
    cluster_id=st.text(max_size=22),
    security=st.sampled_from(Security),
    nodes=st.lists(st.builds(NodePorts, st.integers(1, 3), _port, _port, _port), max_size=3).map(tuple),
    passwords=st.dictionaries(st.text(max_size=8), st.text(max_size=24), max_size=2),
    client_host=st.text(max_size=15),
)
_kube_layouts = st.builds(
    KubeCluster,
    state_dir=_paths,
    version=st.text(max_size=10),
    ports=st.builds(KubePorts, *[_port] * 9),
    binaries=st.dictionaries(st.text(max_size=10), st.text(max_size=30), max_size=3),
    network_cidr=st.text(max_size=18),
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kafka=_kafka_layouts, kube=_kube_layouts)
def test_any_layout_round_trips_written_as_before(tmp_path: Path, kafka: KafkaCluster, kube: KubeCluster) -> None:
    """What `vigil dev status|down` and other processes read back is what `up` saved; the file is the one the
    hand-written `asdict` encoder wrote (a running stack's state stays readable both ways)."""
    kafka, kube = replace(kafka, state_dir=tmp_path), replace(kube, state_dir=tmp_path)
    kafka.save()
    kube.save()
    assert KafkaCluster.load(tmp_path) == kafka
    assert KubeCluster.load(tmp_path) == kube
    before = asdict(kafka) | {"state_dir": str(tmp_path), "libs": str(kafka.libs), "security": kafka.security.value}
    assert (tmp_path / "kafka" / "cluster.json").read_text() == json.dumps(before, indent=2)
    assert (tmp_path / "kube" / "cluster.json").read_text() == json.dumps(asdict(kube) | {"state_dir": str(tmp_path)},
                                                                          indent=2)  # fmt: skip
