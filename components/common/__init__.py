"""Building blocks every concern uses: Kubernetes objects as manifests, certificates, script text."""
