"""etcd, kube-apiserver and friends built from Go modules: no binary download site is reachable here."""
