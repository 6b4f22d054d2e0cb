"""The cluster itself: its CA, the control plane, worker nodes, kubeconfigs and the distribution behind them."""
