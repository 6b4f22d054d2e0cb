"""Kubeflow from the pinned kubeflow/manifests release: what it installs, its overlays, the install."""
