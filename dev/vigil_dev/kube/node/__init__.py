"""The real node: kubelet, containerd, runc, CNI bridge and kube-proxy beside the local control plane."""
