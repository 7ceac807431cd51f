"""Certificates of the local control plane, made with `cryptography` (no openssl CLI), like kubeadm's set.

One CA signs everything: the apiserver's serving certificate, client certificates for the admin
(`O=system:masters`) and kube-controller-manager (its RBAC identity), and the serving certificates of webhooks
run by tests or the operator (`issue_serving_cert`), so a webhook's `caBundle` is the cluster CA.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vigil_dev.kube.node.layout import NODE_NAME
from vigil_operator import pki

#: Names the apiserver answers to, besides the first service IP: what kubeadm puts in its certificate.
APISERVER_NAMES = (
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class ControlPlanePki:
    """The PEM files under one directory (kubeadm's names)."""

    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    @property
    def ca_cert(self) -> Path:
        return self.path("ca.crt")

    @property
    def ca_key(self) -> Path:
        return self.path("ca.key")

    @property
    def sa_key(self) -> Path:
        return self.path("sa.key")

    @property
    def sa_pub(self) -> Path:
        return self.path("sa.pub")

    def cert(self, who: str) -> tuple[Path, Path]:
        """(certificate, key) of `apiserver`, `admin`, `front-proxy-client`, `kubelet-serving` or a `CLIENTS` name."""
        return self.path(f"{who}.crt"), self.path(f"{who}.key")

    def ca(self) -> pki.Issued:
        return pki.load(self.ca_cert, self.ca_key)


#: Client identities besides the admin: (file name, common name, organizations). The names are those the
#: apiserver's RBAC bootstrap binds (system:kube-scheduler, system:kube-proxy -> system:node-proxier) and the
#: Node authorizer recognises (system:node:<name> in system:nodes). The apiserver calls kubelets as a master.
CLIENTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("controller-manager", "system:kube-controller-manager", ()),
    ("kube-scheduler", "system:kube-scheduler", ()),
    ("kube-proxy", "system:kube-proxy", ()),
    ("kubelet", f"system:node:{NODE_NAME}", ("system:nodes",)),
    ("apiserver-kubelet-client", "kube-apiserver-kubelet-client", ("system:masters",)),
)


def write_control_plane_pki(directory: Path, service_ip: str, node_ip: str) -> ControlPlanePki:
    """Create a fresh CA and every certificate the control plane and the node need (overwrites what was there)."""
    files = ControlPlanePki(directory)
    ca = pki.new_ca("vigil-kubernetes-ca")
    ca.write(files.ca_cert, files.ca_key)
    apiserver_hosts = (*APISERVER_NAMES, service_ip, node_ip)
    pki.issue(ca, "kube-apiserver", hosts=apiserver_hosts, server=True).write(*files.cert("apiserver"))
    pki.issue(ca, "vigil-admin", organizations=("system:masters",), client=True).write(*files.cert("admin"))
    for name, common_name, organizations in CLIENTS:
        pki.issue(ca, common_name, organizations=organizations, client=True).write(*files.cert(name))
    pki.issue(ca, NODE_NAME, hosts=(node_ip, NODE_NAME), server=True).write(*files.cert("kubelet-serving"))
    # The aggregation layer's front proxy (kubeadm's front-proxy-ca): without a requestheader CA the
    # controller-manager's delegated authentication logs errors until it gives up on it.
    front = pki.new_ca("vigil-front-proxy-ca")
    front.write(files.path("front-proxy-ca.crt"), files.path("front-proxy-ca.key"))
    pki.issue(front, "front-proxy-client", client=True).write(*files.cert("front-proxy-client"))
    sa = pki.new_key()  # signs service-account tokens (ES256)
    pki.write_secret(files.sa_key, pki.key_pem(sa))
    files.sa_pub.write_bytes(pki.public_pem(sa))
    return files


def issue_serving_cert(
    ca: pki.Issued, directory: Path, hosts: Sequence[str], name: str = "webhook"
) -> tuple[Path, Path]:
    """A serving certificate for `hosts` (IPs or DNS names) signed by `ca`; returns (cert, key) paths.

    For webhooks served by test processes: the apiserver calls them by URL over TLS and checks the name
    against `hosts` and the chain against the webhook's `caBundle` (`ca.cert_pem()`).
    """
    leaf = pki.issue(ca, hosts[0] if hosts else name, hosts=hosts, server=True)
    return leaf.write(directory / f"{name}.crt", directory / f"{name}.key")
