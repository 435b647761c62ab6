"""The local control plane: etcd and kube-apiserver on loopback, for tests and the demo."""
