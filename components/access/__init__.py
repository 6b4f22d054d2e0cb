"""Who may use the cluster: teams, users and their kubeconfigs."""
