"""The fakelet: a node agent that makes pods on a fake Node real processes on this machine.

It registers a Node, binds pending pods to it (there is no scheduler), and for every pod bound to it runs
each container of the admitted spec as a local process group (see `images` for which command an image
stands for and `network` for the pod's own loopback address), runs its probes, restarts it with the
kubelet's back-off, reports real container states, and on deletion sends SIGTERM, waits the grace period,
sends SIGKILL and finalizes the deletion. Run: `python -m vigil_dev.kube.fakelet --kubeconfig K --node N
--state-dir D`; `vigil dev up` and the `fakelet` fixture start it. Limits: see kube/NOTES.md.
"""
