"""What runs on the cluster for its users: GPU support, shared storage, the MPI operator, Kubeflow."""
