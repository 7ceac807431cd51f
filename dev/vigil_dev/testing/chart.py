"""The Helm chart `charts/vigil` driven by the real helm and kubectl binaries, for tests.

helm comes from the control plane's build (`KubeCluster.binaries["helm"]`), kubectl likewise when built (else
`/usr/bin/kubectl`); both talk to the local apiserver through the admin kubeconfig.
"""

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "vigil"
CANONICAL_CRD = ROOT / "crds" / "consumergroups.vigil.dev.yaml"
Obj = dict[str, Any]


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def check(self) -> "Result":
        if self.returncode != 0:
            raise AssertionError(f"{' '.join(self.argv)}: exit {self.returncode}\n{self.output}"[:6000])
        return self


@dataclass(frozen=True)
class Tools:
    helm_bin: Path
    kubectl_bin: Path
    kubeconfig: Path
    home: Path
    """HOME and helm's cache/config/data dirs: nothing from the user's own helm setup leaks in."""

    @classmethod
    def from_binaries(cls, binaries: Mapping[str, str], kubeconfig: Path, home: Path) -> "Tools":
        kubectl = binaries.get("kubectl") or shutil.which("kubectl") or "/usr/bin/kubectl"
        return cls(Path(binaries["helm"]), Path(kubectl), kubeconfig, home)

    def _env(self) -> dict[str, str]:
        return {
            "PATH": "/usr/bin:/bin",
            "HOME": str(self.home),
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }

    def run(self, argv: Sequence[str], *, stdin: str | None = None, timeout: float = 120) -> Result:
        self.home.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, env=self._env(), timeout=timeout, check=False
        )
        return Result(list(argv), done.returncode, done.stdout, done.stderr)

    def helm(self, *args: str, timeout: float = 120) -> Result:
        return self.run([str(self.helm_bin), *args], timeout=timeout)

    def kubectl(self, *args: str, stdin: str | None = None) -> Result:
        return self.run([str(self.kubectl_bin), "--kubeconfig", str(self.kubeconfig), *args], stdin=stdin)

    def values_file(self, name: str, values: Mapping[str, Any]) -> Path:
        path = self.home / f"values-{name}.yaml"
        self.home.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(dict(values), sort_keys=False))
        return path

    def lint(self, values: Mapping[str, Any] | None = None, name: str = "lint") -> Result:
        extra = ["-f", str(self.values_file(name, values))] if values is not None else []
        return self.helm("lint", "--strict", str(CHART), *extra)

    def template(self, release: str, namespace: str, values: Mapping[str, Any], name: str) -> list[Obj]:
        """The rendered chart as objects (without crds/: `helm template` leaves them out unless asked)."""
        out = self.helm(
            "template", release, str(CHART), "--namespace", namespace, "-f", str(self.values_file(name, values))
        ).check()
        return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def dump(objects: Sequence[Mapping[str, Any]]) -> str:
    return "\n---\n".join(json.dumps(o) for o in objects)


def find(objects: Sequence[Obj], kind: str, name: str | None = None) -> list[Obj]:
    return [o for o in objects if o.get("kind") == kind and (name is None or o["metadata"]["name"] == name)]


def service_account_kubeconfig(tools: Tools, namespace: str, account: str, path: Path) -> Path:
    """A kubeconfig that acts as ServiceAccount `namespace/account` (a TokenRequest token, 1 h), nothing more."""
    token = tools.kubectl("create", "token", account, "--namespace", namespace, "--duration", "1h").check()
    admin: Obj = json.loads(tools.kubeconfig.read_text())
    config = {
        **admin,
        "users": [{"name": account, "user": {"token": token.stdout.strip()}}],
        "contexts": [{"name": account, "context": {"cluster": admin["clusters"][0]["name"], "user": account}}],
        "current-context": account,
    }
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path
